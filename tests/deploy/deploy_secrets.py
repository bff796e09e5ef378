"""The Secrets deploy/k8s's components mount, made as docs/deploy.md says.

ferry-tls: a CA of the test's own and one certificate for every process,
with the SANs of the docs' recipe (DNS:ferry, the Service names, localhost,
127.0.0.1), usable as server and client certificate (mutual TLS).
ferry-auth: a random 32-byte hex token.
"""

import os
import secrets as pysecrets
import subprocess

SAN = ("subjectAltName=DNS:ferry,DNS:ferry-coordinator,DNS:ferry-coordinator.ferry.svc,"
       "DNS:*.ferry-ps,DNS:*.ferry-ps.ferry.svc,DNS:localhost,IP:127.0.0.1\n"
       "extendedKeyUsage=serverAuth,clientAuth\n")


def secret_names(docs):
    """Names of the Secrets the workloads' volumes project."""
    names = set()
    for wl in docs:
        if wl.get("kind") not in ("Deployment", "StatefulSet"):
            continue
        for v in wl["spec"]["template"]["spec"].get("volumes", []):
            if "secret" in v:
                names.add(v["secret"]["secretName"])
    return names


class Secrets:
    """data: Secret name -> {key: bytes}; dir(name): where the files are
    on this machine (for the operator's `ferry status`)."""

    def __init__(self, names, work_dir):
        self.root = os.path.join(work_dir, "secrets")
        self.data = {}
        for name in sorted(names):
            d = os.path.join(self.root, name)
            os.makedirs(d, exist_ok=True)
            if name == "ferry-tls":
                self._tls(d)
            elif name == "ferry-auth":
                with open(os.path.join(d, "token"), "w") as f:
                    f.write(pysecrets.token_hex(32))
            else:
                raise LookupError(f"Secret {name}: not one this test knows how to make")
            self.data[name] = {k: open(os.path.join(d, k), "rb").read()
                               for k in os.listdir(d) if k in ("tls.crt", "tls.key", "ca.crt",
                                                                "token")}

    def dir(self, name):
        return os.path.join(self.root, name)

    @staticmethod
    def _tls(d):
        def openssl(*args):
            subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)
        key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl("req", "-x509", *key, "-days", "2", "-subj", "/CN=ferry-ca",
                "-keyout", "ca.key", "-out", "ca.crt")
        openssl("req", *key, "-subj", "/CN=ferry", "-keyout", "tls.key", "-out", "tls.csr")
        with open(os.path.join(d, "san.ext"), "w") as f:
            f.write(SAN)
        openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "tls.crt")
