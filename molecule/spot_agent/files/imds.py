"""A stand-in for EC2's instance metadata service (IMDSv2) for the spot_agent scenario.

Answers ``PUT /latest/api/token`` with a token and, for that token, serves a spot interruption
notice at ``/latest/meta-data/spot/instance-action`` (404 for every other path). Listens on
127.0.0.1 on a free port, writes the port and its pid to files, and exits after ``--seconds``.

    python3 imds.py PORT_FILE PID_FILE [--seconds 300]
"""

import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "molecule-token"  # noqa: S105 (the stand-in's one token)
NOTICE = {"action": "terminate", "time": "2026-11-25T14:02:00Z"}


class Handler(BaseHTTPRequestHandler):
    def _send(self, status, body=""):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            self._send(200, TOKEN)
        else:
            self._send(400)

    def do_GET(self):
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            self._send(401)
        elif self.path == "/latest/meta-data/spot/instance-action":
            self._send(200, json.dumps(NOTICE))
        else:
            self._send(404)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port_file")
    ap.add_argument("pid_file")
    ap.add_argument("--seconds", type=float, default=300)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.pid_file, "w", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    with open(args.port_file + ".tmp", "w", encoding="utf-8") as f:
        f.write(f"{server.server_address[1]}\n")
    os.replace(args.port_file + ".tmp", args.port_file)
    threading.Timer(args.seconds, server.shutdown).start()
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
