"""EC2 through boto3: the adapter (``cloud``), every call elb makes and its IAM policy
(``contract``, ``iam``), the notices through SQS (``notices``), the console's host keys and the
user data (``console``, ``user_data``), the inventory plugin's reader (``inventory``) and the
EC2 verbs (``cli``: ``elb ec2-check``, ``ec2-events``, ``iam-policy``). Imports ``elb.core`` and
``elb.provision``.
"""
