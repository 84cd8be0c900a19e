#!/usr/bin/env bash
# The one base image every image of docker-compose.yaml starts from, made here
# instead of pulled: `debootstrap --variant=minbase bookworm` from the Debian
# mirror this machine's apt is configured with, then `docker import`.
#
#   scripts/make_debian_base.sh [TAG]        (root; default tag eos-etl-base:bookworm)
#   scripts/make_debian_base.sh --print-sources   the mirror and the image's sources.list, nothing made
#
# The Dockerfile's build argument BASE_IMAGE defaults to debian:bookworm-slim
# (what a machine with a registry pulls); `make compose-check` builds with
# BASE_IMAGE=<this tag> so nothing is pulled from any registry.
#
# The mirror is read from apt's own configuration (`apt-get indextargets`: the
# URI serving `bookworm`), never a hard-coded host; EOS_ETL_DEBIAN_MIRROR names
# another one. The image's /etc/apt/sources.list lists the same repositories
# for bookworm, bookworm-updates and bookworm-security as this machine has, so
# images built on it get the security updates this machine gets. Like the
# official -slim images, documentation, man pages and translations are left
# out (dpkg path excludes kept in the image, so later installs skip them too).
#
# Idempotent: an existing TAG is kept (EOS_ETL_REBUILD_BASE=1 makes it anew).
set -euo pipefail

suite=bookworm
print_only=""
if [[ ${1:-} == --print-sources ]]; then print_only=1; shift; fi
tag=${1:-eos-etl-base:bookworm}

fail() { echo "make_debian_base: $*" >&2; exit 1; }

# "deb <uri> <release> <component>" for every configured binary repository of this Debian release.
mapfile -t repos < <(apt-get indextargets --format '$(TARGET_OF) $(REPO_URI) $(RELEASE) $(COMPONENT)' 2> /dev/null \
  | awk -v s="$suite" '$1 == "deb" && ($3 == s || $3 ~ "^" s "-") { print $2, $3, $4 }' | sort -u)
mirror=${EOS_ETL_DEBIAN_MIRROR:-}
if [[ -z $mirror ]]; then
  for line in "${repos[@]}"; do
    read -r uri release _ <<< "$line"
    if [[ $release == "$suite" ]]; then mirror=$uri; break; fi
  done
fi
[[ -n $mirror ]] || fail "apt on this machine has no repository for Debian $suite; set EOS_ETL_DEBIAN_MIRROR to a Debian mirror URL"

sources() {  # the same repositories as this machine (release, -updates, -security), or the mirror alone
  echo "# Made by eos-etl's scripts/make_debian_base.sh from this machine's apt configuration."
  if ((${#repos[@]})) && [[ -z ${EOS_ETL_DEBIAN_MIRROR:-} ]]; then
    # One line per repository and suite, its components joined.
    printf '%s\n' "${repos[@]}" | awk '{ c[$1 " " $2] = c[$1 " " $2] " " $3 } END { for (k in c) print "deb " k c[k] }' | sort
  else
    echo "deb $mirror $suite main"
  fi
}
if [[ -n $print_only ]]; then
  echo "mirror: $mirror"
  sources
  exit 0
fi

[[ $(id -u) == 0 ]] || fail "run as root (debootstrap needs it)"
command -v debootstrap > /dev/null || fail "debootstrap is missing: apt-get install debootstrap"
docker info > /dev/null 2>&1 || fail "no Docker engine answers (start dockerd first)"
if [[ -z ${EOS_ETL_REBUILD_BASE:-} ]] && docker image inspect "$tag" > /dev/null 2>&1; then
  echo "make_debian_base: $tag exists; kept (EOS_ETL_REBUILD_BASE=1 makes it anew)"
  exit 0
fi

root=$(mktemp -d /var/tmp/eos-etl-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "make_debian_base: debootstrap --variant=minbase $suite from $mirror"
debootstrap --variant=minbase "$suite" "$root" "$mirror" > "$root.log" 2>&1 \
  || { tail -20 "$root.log" >&2; rm -f "$root.log"; fail "debootstrap failed"; }
rm -f "$root.log"

sources > "$root/etc/apt/sources.list"

# Slim, as the official -slim images are: no docs, man pages or translations, now or later.
cat > "$root/etc/dpkg/dpkg.cfg.d/eos-etl-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
EOF
cat > "$root/etc/apt/apt.conf.d/eos-etl-slim" <<'EOF'
APT::Install-Recommends "false";
Acquire::Languages "none";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
EOF
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2> /dev/null || true
rm -rf "$root"/usr/share/{man,groff,info,lintian,locale}/* "$root"/var/cache/apt/archives/*.deb \
  "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* "$root"/var/log/*.log "$root"/tmp/*

tar --numeric-owner -C "$root" -c . \
  | docker import --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' \
      --message "debootstrap --variant=minbase $suite from $mirror" - "$tag" > /dev/null
echo "make_debian_base: $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
