"""Cloud providers behind elb.interfaces.Cloud: ec2 (boto3) and local (podman)."""
