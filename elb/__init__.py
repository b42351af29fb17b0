"""elb: an elastic load balancer for Grid Engine clusters."""

__version__ = "0.1.0"
