from streaming.base import util  # noqa: F401
