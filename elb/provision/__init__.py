"""Provisioning behind elb.interfaces.Provisioner: Ansible playbooks through ansible-runner."""
