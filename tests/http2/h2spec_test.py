#!/usr/bin/env python3
"""Runs h2spec (the HTTP/2 conformance suite, 145 cases) against tern's server (peer_server), in clear (h2c with
prior knowledge) or over TLS (ALPN h2), on the backend TERN_BACKEND names. Fails on any case that does not pass,
a skipped one included (the server's answers are long enough for every case to run). Exits 77, which ctest reports
as skipped, only when h2spec cannot be had because Go is not installed."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--h2spec", required=True)
    p.add_argument("--build-script", required=True)
    p.add_argument("--server", required=True)
    p.add_argument("--tls", action="store_true")
    a = p.parse_args()

    if not os.access(a.h2spec, os.X_OK):
        if shutil.which("go") is None:
            print("SKIPPED: Go is not installed, so h2spec (the HTTP/2 conformance suite) cannot be built")
            return 77
        subprocess.run(["bash", a.build_script], check=True)

    with tempfile.TemporaryDirectory() as tmp:
        server = [a.server]
        h2spec_flags = []
        if a.tls:
            cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                            "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
                           check=True, capture_output=True)
            server += ["--tls", cert, key]
            h2spec_flags = ["-t", "-k"]
        proc = subprocess.Popen(server, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            if not line.startswith("port "):
                print("the server did not start:", line)
                return 1
            port = line.split()[1]
            report = os.path.join(tmp, "report.xml")
            run = subprocess.run([a.h2spec, "-h", "127.0.0.1", "-p", port, "-o", "2", "-j", report] + h2spec_flags,
                                 capture_output=True, text=True, timeout=240)
            tail = run.stdout.strip().splitlines()[-1:] or ["(no output)"]
            print(tail[0])
            failed = []
            total = 0
            for case in ET.parse(report).getroot().iter("testcase"):
                total += 1
                if case.find("failure") is not None or case.find("skipped") is not None or \
                        case.find("error") is not None:
                    failed.append(case.get("package") + ": " + case.get("classname"))
            if run.returncode != 0 or failed or total != 145:
                print(run.stdout[-6000:])
                print("not passed:", *failed, sep="\n  ")
                return 1
            return 0
        finally:
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                print("the server did not shut down within 10 s")
                return 1


if __name__ == "__main__":
    sys.exit(main())
