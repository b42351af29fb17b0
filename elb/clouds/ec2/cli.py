"""The EC2 verbs: ``elb ec2-check`` (is elb ready to run on EC2? credentials, settings, IAM
permissions; nothing is started or stopped: launch and terminate are dry runs; also runnable
as ``python -m elb.clouds.ec2.cli``), ``elb ec2-events`` (the notice queue and rules) and
``elb iam-policy`` (the IAM policy for a config, from the calls elb makes).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from elb.clouds.ec2.config import ec2_settings
from elb.core.config import ConfigError, load_config
from elb.core.exitcodes import Exit
from elb.core.interfaces import CloudError


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", type=Path, default=None, help="config file (default /etc/elb/elb.yml)")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ec2-check",
        help="check EC2 credentials, launch settings and IAM permissions (dry runs; exit 1 on a problem)",
        description="Checks with EC2's DryRun requests that the credentials work and that the launch, "
        "describe and terminate calls elb makes are allowed with the configured settings; prints one line "
        "per check. Exit 1 on a problem.",
    )
    _add_arguments(p)
    p.add_argument("--json", action="store_true", help="one JSON object: {'checks': [...], 'failed': N}")
    p.set_defaults(func=cmd_ec2_check)
    p = sub.add_parser(
        "ec2-events",
        help="create or check the EventBridge rules and SQS queue of EC2's notices (spot interruptions, ...)",
        description="setup: creates (or brings back to shape) the queue elb-CLUSTER-notices, one EventBridge "
        "rule per kind of notice (spot interruption warning, rebalance recommendation, state change, AWS "
        "Health scheduled change) aimed at it, and a queue policy that lets only those rules send; then set "
        "cloud.ec2.notices: true. check: says whether they are all there. Exit 1 on a problem.",
    )
    p.add_argument("action", choices=("setup", "check"))
    _add_arguments(p)
    p.set_defaults(func=cmd_ec2_events)
    p = sub.add_parser(
        "iam-policy",
        help="print the IAM policy elb needs, scoped by the config (cluster tags, template, subnets, images)",
        description="Prints the IAM policy of elb's identity, built from the list of AWS calls elb makes "
        "(elb/clouds/ec2/contract.py) and scoped by the config: launches only with the cluster's tags and from "
        "the configured launch templates, subnets, images, security groups and key pair; terminate, stop "
        "and start only on the cluster's elb workers. Only the Describe calls AWS does not scope are on "
        "'*'. Parts the config does not say stay placeholders: REGION (without cloud.ec2.region), "
        "ACCOUNT_ID (--account) and WORKER_ROLE (--worker-role, the role in the workers' instance "
        "profile). Without --json: one block per statement with why.",
    )
    _add_arguments(p)
    p.add_argument("--json", action="store_true", help="print the policy document (JSON)")
    p.add_argument("--setup", action="store_true", help="the admin's policy for elb ec2-events setup and check")
    p.add_argument("--account", default=None, help="the AWS account id (12 digits)")
    p.add_argument("--worker-role", default=None, help="the IAM role of the workers' instance profile")
    p.add_argument(
        "--generic",
        action="store_true",
        help="no config: placeholders for everything (what docs/iam-policy.json holds)",
    )
    p.set_defaults(func=cmd_iam_policy)


def cmd_ec2_check(args: argparse.Namespace) -> int:
    from elb.clouds.ec2.cloud import Ec2Cloud  # noqa: PLC0415  (boto3 only when asked)
    from elb.clouds.ec2.preflight import preflight  # noqa: PLC0415  (boto3 only when asked)

    try:
        cfg = load_config(args.config)
    except ConfigError as err:
        print(f"elb: {err}", file=sys.stderr)
        return Exit.CONFIG
    try:
        cloud = Ec2Cloud.from_config(cfg)
    except CloudError as err:
        print(f"elb: {err}", file=sys.stderr)
        return Exit.UNREADABLE
    checks = preflight(cloud, warm_pool=cfg.has_warm_pool, boot=cfg.provision.mode == "boot")
    failed = sum(not c.ok for c in checks)
    if getattr(args, "json", False):
        doc = {"checks": [{"what": c.what, "ok": c.ok, "detail": c.detail} for c in checks], "failed": failed}
        print(json.dumps(doc, indent=2))
    else:
        for c in checks:
            print(f"{'ok  ' if c.ok else 'FAIL'} {c.what}: {c.detail}")
    return Exit.FAILED if failed else Exit.OK


def cmd_ec2_events(args: argparse.Namespace) -> int:
    from elb.clouds.ec2.notices import check_events, events_client, setup_events, sqs_client  # noqa: PLC0415

    try:
        cfg = load_config(args.config)
    except ConfigError as err:
        print(f"elb: {err}", file=sys.stderr)
        return Exit.CONFIG
    try:
        sqs, events = sqs_client(ec2_settings(cfg)), events_client(ec2_settings(cfg))
        if args.action == "setup":
            for line in setup_events(sqs, events, cfg.cluster.name):
                print(f"ok   {line}")
            return Exit.OK
        checks = check_events(sqs, events, cfg.cluster.name)
    except CloudError as err:
        print(f"elb: {err}", file=sys.stderr)
        return Exit.UNREADABLE
    for c in checks:
        print(f"{'ok  ' if c.ok else 'FAIL'} {c.what}: {c.detail}")
    return Exit.OK if all(c.ok for c in checks) else Exit.FAILED


def cmd_iam_policy(args: argparse.Namespace) -> int:
    from elb.clouds.ec2.iam import Scope, render_json, render_text  # noqa: PLC0415  (boto3 only when asked)

    if args.account is not None and not re.fullmatch(r"[0-9]{12}", args.account):
        print(f"elb: --account {args.account!r} is not a 12-digit AWS account id", file=sys.stderr)
        return Exit.USAGE
    if args.worker_role is not None and not re.fullmatch(r"[\w+=,.@/-]{1,512}", args.worker_role):
        print(f"elb: --worker-role {args.worker_role!r} is not an IAM role name", file=sys.stderr)
        return Exit.USAGE
    if args.generic:
        scope = Scope.generic()
    else:
        try:
            cfg = load_config(args.config)
        except ConfigError as err:
            print(f"elb: {err}", file=sys.stderr)
            return Exit.CONFIG
        if cfg.cloud.provider != "ec2":
            print(f"elb: cloud.provider is {cfg.cloud.provider}: elb makes no AWS calls, no policy", file=sys.stderr)
            return Exit.CONFIG
        scope = Scope.from_config(cfg, account=args.account, worker_role=args.worker_role)
    caller: Literal["daemon", "setup"] = "setup" if args.setup else "daemon"
    print(render_json(scope, caller) if args.json else render_text(scope, caller), end="")
    return Exit.OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="elb ec2-check", description=__doc__)
    _add_arguments(parser)
    return cmd_ec2_check(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
