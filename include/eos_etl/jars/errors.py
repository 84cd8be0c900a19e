"""The jars' errors: what Maven could not fetch."""

from ..errors import StackError


class MavenFetchError(StackError):
    """Maven could not fetch the artifacts; carries Maven's own error lines."""
