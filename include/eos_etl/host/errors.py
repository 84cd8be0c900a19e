"""The machine's errors: a program that is not installed, a port another process holds."""

from ..errors import StackError


class MissingToolError(StackError):
    """A required program (java, mvn) is not installed."""


class PortInUseError(StackError):
    """A port the stack wants is already taken by another process."""
