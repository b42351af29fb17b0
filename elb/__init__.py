"""elb: an elastic load balancer for Grid Engine clusters."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("elb")  # pyproject.toml's, from the installed metadata
except PackageNotFoundError:  # a checkout on PYTHONPATH with no install of elb at all
    __version__ = "0+unknown"
