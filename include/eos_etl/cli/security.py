"""The security commands: a pipeline role's ACLs, SCRAM users.

acl grant | scram-user

A password never comes from a flag (it would show in ``ps``): from a file or
an environment variable.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigurationError
from ..kafka.acls import grant, principal_name
from ..kafka.grants import ROLES
from ..kafka.users import MECHANISM, set_scram_users
from .options import ID, add_connection, add_shop, connection_from_args, read_file, shop_settings_from_args


def register(sub) -> None:
    """Add the security commands to the top parser's subparsers."""
    _add_acl(sub)
    _add_scram_user(sub)


def _add_acl(sub) -> None:
    p = sub.add_parser("acl", help="grant a principal exactly the ACLs a pipeline role needs, and print them")
    p.add_argument("action", choices=["grant"])
    p.add_argument("--principal", required=True, help="the SASL user (or User:<name>) to grant to")
    p.add_argument("--role", action="append", choices=list(ROLES), required=True,
                   help="pipeline: plan and run windows; validator: data-quality validation; watcher: the "
                        "event-driven DAG's arrivals consumer (its group: the pipeline's + '-arrivals') (repeatable)")
    p.add_argument("--replay-version", metavar="VERSION",
                   help="grant on the resources of a replay under this output version instead (its topics "
                        "<topic>.VERSION, group and transactional ids)")
    add_connection(p)
    add_shop(p)
    p.set_defaults(func=cmd_acl)


def cmd_acl(args) -> int:
    settings = shop_settings_from_args(args)
    if args.replay_version:
        settings = settings.replay(args.replay_version)
    grants = list(dict.fromkeys(g for role in args.role for g in settings.pipeline().resources().grants(role)))
    grant(connection_from_args(args), args.principal, grants)
    for g in grants:
        print(f"granted {principal_name(args.principal)}: {g}")
    return 0


def _add_scram_user(sub) -> None:
    p = sub.add_parser("scram-user", help="create or update a SCRAM-SHA-512 user (as the super-user); the "
                                          "password comes from a file or an environment variable, never a flag")
    p.add_argument("--username", required=True, type=ID("--username"))
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--password-file", type=Path, help="file holding the new user's password")
    source.add_argument("--password-env", metavar="VAR", help="environment variable holding the new user's password")
    add_connection(p)
    p.set_defaults(func=cmd_scram_user)


def cmd_scram_user(args) -> int:
    if args.password_file:
        password = read_file("--password-file", args.password_file).strip()
    else:
        password = os.environ.get(args.password_env, "")
    if len(password) < 12:
        raise ConfigurationError(f"the password for {args.username!r} is empty or shorter than 12 characters "
                                 f"({'--password-file' if args.password_file else '$' + args.password_env})")
    set_scram_users(connection_from_args(args), {args.username: password})
    print(f"{MECHANISM} credentials stored for User:{args.username}")
    return 0
