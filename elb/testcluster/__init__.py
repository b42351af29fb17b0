"""elb test cluster."""
