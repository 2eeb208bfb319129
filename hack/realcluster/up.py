"""`hack/realcluster/up`: a real Kubernetes v1.37 control plane on 127.0.0.1 for tasq's tests.

Builds the `realcluster` binary (etcd, kube-apiserver, kube-controller-manager, kube-scheduler),
kwok and JobSet's controller into a cache directory keyed by the pins (rebuilt only when one
changes), starts them with generated certificates, creates the same sample nodes as `tasq dev` as
kwok nodes, applies crds/, installs kwok stages that honour the devcluster's test annotations, with
`--jobset` also JobSet's CRD and controller (its webhooks served on loopback), prints `ready` and
serves until SIGINT/SIGTERM. With `--control FILE` it also serves a control endpoint on loopback (its URL written
to FILE) that restarts kube-apiserver or etcd with the same flags, so tests inject those faults.
Run by people and by the `--cluster=real` pytest fixture (tests/conftest.py).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import fcntl
import hashlib
import http.server
import importlib
import ipaddress
import json
import os
import pkgutil
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, urlsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KUBERNETES_VERSION = "v1.37.2"
KWOK_MODULE = "sigs.k8s.io/kwok/cmd/kwok"
KWOK_VERSION = "v0.8.0"
FRONT_PROXY_CLIENT = "front-proxy-client"
PINNED_FILES = ("go.mod", "go.sum", "main.go")
# JobSet's controller is built from its own module (its go.mod pins an older Kubernetes client than
# the control plane's): jobset/go.mod names it as a tool, so go.sum pins every dependency. It has its
# own cache key, so a change to either side rebuilds only that side.
JOBSET_PINNED_FILES = ("jobset/go.mod", "jobset/go.sum")
JOBSET_MODULE = "sigs.k8s.io/jobset"
JOBSET_DIR = HERE / "jobset"
JOBSET_CRD = "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"  # inside the module
DEFAULT_TOPOLOGY = "2x4x4x8"  # as `tasq dev`
NODE_PREFIX = "gpu-"  # `tasq dev` names its topology nodes gpu-b1-r1-n1, ...
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"
ANNOTATION_RUN_SECONDS = "devcluster.tasq.io/run-seconds"
ANNOTATION_FAIL = "devcluster.tasq.io/fail"
ANNOTATION_NOT_READY = "devcluster.tasq.io/not-ready"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"  # the devcluster kubelet's pod IPs come from this range too
CLUSTER_NAME = "tasq-realcluster"
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
RESTARTABLE = ("kube-apiserver", "etcd")
PR_SET_PDEATHSIG = 1

LDFLAGS = " ".join([
    f"-X k8s.io/component-base/version.gitVersion={KUBERNETES_VERSION}",
    "-X k8s.io/component-base/version.gitMajor=1",
    "-X k8s.io/component-base/version.gitMinor=37",
    f"-X k8s.io/client-go/pkg/version.gitVersion={KUBERNETES_VERSION}",
])


class UpError(Exception):
    """The control plane cannot be built or started; the message says which step and why."""


def log(message: str) -> None:
    print(f"realcluster: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- building


def cache_key(files: tuple[str, ...] = PINNED_FILES, extra: str = f"{KWOK_MODULE}@{KWOK_VERSION}\0{LDFLAGS}\0") -> str:
    """A digest of everything binaries are built from: the pinned Go files, `extra` (kwok's version,
    the link flags) and Go's version."""
    digest = hashlib.sha256()
    for name in files:
        digest.update(name.encode() + b"\0" + (HERE / name).read_bytes() + b"\0")
    digest.update(extra.encode())
    digest.update(run_go(["version"], capture=True).encode())
    return digest.hexdigest()[:16]


def run_go(args: list[str], capture: bool = False, env: Mapping[str, str] | None = None,
           cwd: Path | None = None) -> str:
    """Runs `go ARGS`; UpError with the command and its output when it fails or Go is missing."""
    go = shutil.which("go")
    if go is None:
        raise UpError("`go` is not on PATH; the real control plane is built from Go modules (Go 1.26)")
    proc = subprocess.run([go, *args], cwd=cwd, env={**os.environ, **(env or {})}, text=True,
                          stdout=subprocess.PIPE if capture else sys.stderr, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise UpError(f"`go {' '.join(args)}` failed with exit code {proc.returncode}"
                      + (f":\n{proc.stdout}" if capture else " (its output is above)"))
    return proc.stdout or ""


def ensure_binaries(cache_root: Path) -> tuple[Path, Path]:
    """The realcluster and kwok binaries of the current pins, built into `cache_root/<key>/` when missing.

    A lock file serialises concurrent `up`s; each binary is built under a temporary name and renamed,
    so an interrupted build never leaves a half-written binary that looks finished."""
    target = cache_root / cache_key()
    target.mkdir(parents=True, exist_ok=True)
    realcluster, kwok = target / "realcluster", target / "kwok"
    with (target / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        env = {"CGO_ENABLED": "0"}
        if not realcluster.exists():
            log(f"building realcluster (Kubernetes {KUBERNETES_VERSION}) into {target}")
            started = time.monotonic()
            partial = target / "realcluster.partial"
            run_go(["build", "-o", str(partial), "-ldflags", LDFLAGS, "."], env=env, cwd=HERE)
            partial.rename(realcluster)
            log(f"built realcluster in {time.monotonic() - started:.0f}s")
        if not kwok.exists():
            log(f"building kwok {KWOK_VERSION} into {target}")
            started = time.monotonic()
            gobin = Path(tempfile.mkdtemp(prefix="kwok-", dir=target))
            try:
                run_go(["install", f"{KWOK_MODULE}@{KWOK_VERSION}"], env={**env, "GOBIN": str(gobin)}, cwd=HERE)
                (gobin / "kwok").rename(kwok)
            finally:
                shutil.rmtree(gobin, ignore_errors=True)
            log(f"built kwok in {time.monotonic() - started:.0f}s")
    return realcluster, kwok


def ensure_jobset(cache_root: Path) -> tuple[Path, Path]:
    """JobSet's controller and its CRD (copied from the module Go downloaded) in
    `cache_root/jobset-<key>/`, built when missing, under a lock and temporary names as above."""
    target = cache_root / f"jobset-{cache_key(JOBSET_PINNED_FILES, '')}"
    target.mkdir(parents=True, exist_ok=True)
    jobset, crd = target / "jobset-controller", target / "jobset-crd.yaml"
    with (target / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not jobset.exists() or not crd.exists():
            log(f"building JobSet's controller ({JOBSET_MODULE} as pinned in {JOBSET_DIR}) into {target}")
            started = time.monotonic()
            run_go(["build", "-o", str(target / "jobset-controller.partial"), JOBSET_MODULE],
                   env={"CGO_ENABLED": "0"}, cwd=JOBSET_DIR)
            module_dir = run_go(["list", "-m", "-f", "{{.Dir}}", JOBSET_MODULE], capture=True, cwd=JOBSET_DIR).strip()
            shutil.copyfile(Path(module_dir) / JOBSET_CRD, target / "jobset-crd.yaml.partial")
            (target / "jobset-crd.yaml.partial").rename(crd)
            (target / "jobset-controller.partial").rename(jobset)
            log(f"built JobSet's controller in {time.monotonic() - started:.0f}s")
    return jobset, crd


# ---------------------------------------------------------------- certificates


def write_certificates(pki: Path) -> None:
    """A CA, the apiserver's serving cert (loopback names), an admin client cert in system:masters, the
    service-account signing key pair, and the front-proxy CA with the aggregator's client cert (CN
    front-proxy-client: kube-apiserver calls APIServices with it and publishes that CA in
    kube-system/extension-apiserver-authentication), all EC P-256, as PEM files in `pki`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    def issue(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
              signer: ec.EllipticCurvePrivateKey, ca: bool, usage: list[x509.ObjectIdentifier],
              names: list[x509.GeneralName]) -> bytes:
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=7))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if usage:
            builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tasq-realcluster-ca")])
    (pki / "ca.crt").write_bytes(issue(ca_name, ca_key, ca_name, ca_key, True, [], []))
    serving_key = ec.generate_private_key(ec.SECP256R1())
    dns = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
           "kubernetes.default.svc.cluster.local"]
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", "10.96.0.1")]
    (pki / "apiserver.crt").write_bytes(issue(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]), serving_key, ca_name, ca_key,
        False, [ExtendedKeyUsageOID.SERVER_AUTH], names))
    (pki / "apiserver.key").write_bytes(key_pem(serving_key))
    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                            x509.NameAttribute(NameOID.COMMON_NAME, "tasq-admin")])
    (pki / "admin.crt").write_bytes(issue(admin_name, admin_key, ca_name, ca_key, False,
                                          [ExtendedKeyUsageOID.CLIENT_AUTH], []))
    (pki / "admin.key").write_bytes(key_pem(admin_key))
    proxy_ca_key = ec.generate_private_key(ec.SECP256R1())
    proxy_ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tasq-realcluster-front-proxy-ca")])
    (pki / "front-proxy-ca.crt").write_bytes(issue(proxy_ca_name, proxy_ca_key, proxy_ca_name, proxy_ca_key,
                                                   True, [], []))
    proxy_key = ec.generate_private_key(ec.SECP256R1())
    (pki / "front-proxy-client.crt").write_bytes(issue(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, FRONT_PROXY_CLIENT)]), proxy_key, proxy_ca_name,
        proxy_ca_key, False, [ExtendedKeyUsageOID.CLIENT_AUTH], []))
    (pki / "front-proxy-client.key").write_bytes(key_pem(proxy_key))
    sa_key = ec.generate_private_key(ec.SECP256R1())
    (pki / "sa.key").write_bytes(key_pem(sa_key))
    (pki / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def kubeconfig_text(pki: Path, server: str) -> str:
    """An admin kubeconfig (JSON, which kubectl and the clients read as YAML) with embedded credentials."""
    import base64

    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": CLUSTER_NAME,
        "clusters": [{"name": CLUSTER_NAME, "cluster": {"server": server,
                                                        "certificate-authority-data": data("ca.crt")}}],
        "users": [{"name": "tasq-admin", "user": {"client-certificate-data": data("admin.crt"),
                                                  "client-key-data": data("admin.key")}}],
        "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": "tasq-admin"}}],
    }
    return json.dumps(config, indent=2) + "\n"


# ---------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: SIGTERM when `up` dies, even by SIGKILL, so no component outlives it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Processes:
    """The started components, each logging to `<workdir>/<name>.log`; stopped in reverse order."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.running: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.argv: dict[str, list[str]] = {}
        self.lock = threading.Lock()
        """Held by `check` and across a restart, so a component stopped on purpose is not taken for dead."""

    def start(self, name: str, argv: list[str]) -> None:
        self.argv[name] = argv
        self.running.append((name, self._spawn(name, argv, "wb")))

    def _spawn(self, name: str, argv: list[str], mode: str) -> subprocess.Popen[bytes]:
        out = (self.workdir / f"{name}.log").open(mode)
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)
        out.close()
        return proc

    def check(self) -> None:
        """UpError naming the first component that exited, with the end of its log."""
        with self.lock:
            for name, proc in self.running:
                if proc.poll() is not None:
                    raise UpError(f"{name} exited with code {proc.returncode}:\n{self.tail(name)}")

    def restart(self, name: str, sig: signal.Signals, down_seconds: float) -> None:
        """Stop `name` with `sig` (SIGKILL after STOP_TIMEOUT), wait `down_seconds`, start it again
        with the same command line (same ports, certificates and data directory); its log goes on."""
        index = next(i for i, (n, _) in enumerate(self.running) if n == name)
        proc = self.running[index][1]
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        time.sleep(down_seconds)
        with (self.workdir / f"{name}.log").open("ab") as out:
            out.write(f"\n==== realcluster: restarted after {sig.name} ====\n".encode())
        self.running[index] = (name, self._spawn(name, self.argv[name], "ab"))

    def tail(self, name: str, lines: int = 25) -> str:
        path = self.workdir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        for _name, proc in reversed(self.running):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.running.clear()


def wait_for(what: str, probe: Callable[[], bool], processes: Processes, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        processes.check()
        if time.monotonic() > deadline:
            raise UpError(f"{what} not ready after {timeout:.0f}s")
        time.sleep(0.2)


class Api:
    """Just enough of a REST client (stdlib) for `up` to wait for readiness and create nodes."""

    def __init__(self, server: str, pki: Path) -> None:
        self.server = server
        self.context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method,
                                     headers={"Content-Type": content_type, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=10) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw.startswith(b"{") else raw.decode())
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, (json.loads(raw) if raw.startswith(b"{") else raw.decode(errors="replace"))
        except (urllib.error.URLError, OSError):
            return 0, None

    def ok(self, path: str) -> bool:
        return self.request("GET", path)[0] == 200


# ---------------------------------------------------------------- control endpoint


class _ControlHandler(http.server.BaseHTTPRequestHandler):
    """`POST /restart?component=kube-apiserver|etcd[&signal=TERM|KILL][&down=SECONDS]`: restart one
    component with its own flags and answer once kube-apiserver is ready again (200, JSON with the
    seconds it took); 400 for a bad query, 500 when the component does not come back."""

    processes: Processes
    api: Api

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            if url.path != "/restart":
                raise ValueError(f"unknown path {url.path!r}; POST /restart?component=...")
            component = query.get("component", "kube-apiserver")
            if component not in RESTARTABLE:
                raise ValueError(f"component {component!r}: want one of {', '.join(RESTARTABLE)}")
            sig = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}.get(query.get("signal", "TERM"))
            if sig is None:
                raise ValueError(f"signal {query['signal']!r}: want TERM or KILL")
            down = float(query.get("down", "0"))
            if not 0 <= down <= 60:
                raise ValueError(f"down {down}: want 0 to 60 seconds")
        except ValueError as e:
            self._answer(400, {"error": str(e)})
            return
        started = time.monotonic()
        try:
            restart(self.processes, self.api, component, sig, down)
        except UpError as e:
            self._answer(500, {"error": str(e)})
            return
        self._answer(200, {"restarted": component, "seconds": round(time.monotonic() - started, 3)})

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log(f"control: {format % args}")


def restart(processes: Processes, api: Api, component: str, sig: signal.Signals, down: float) -> None:
    """Restart `component` (see `Processes.restart`) and wait until kube-apiserver answers /readyz;
    UpError with the end of the component's log when it does not within START_TIMEOUT."""
    with processes.lock:
        log(f"restarting {component} ({sig.name}, down {down:g}s)")
        processes.restart(component, sig, down)
        proc = dict(processes.running)[component]
        deadline = time.monotonic() + START_TIMEOUT
        while not api.ok("/readyz"):
            if proc.poll() is not None:
                raise UpError(f"{component} exited with code {proc.returncode} after its restart:\n"
                              f"{processes.tail(component)}")
            if time.monotonic() > deadline:
                raise UpError(f"kube-apiserver not ready {START_TIMEOUT:.0f}s after restarting {component}")
            time.sleep(0.1)
        log(f"restarted {component}")


def serve_control(processes: Processes, api: Api, url_file: Path) -> http.server.HTTPServer:
    """The control endpoint on a free loopback port, its URL written to `url_file`. One thread serves
    it for the life of `up`, one request at a time: the components it restarts are its children, and
    their parent-death signal (`_die_with_parent`) fires when the thread that started them ends."""
    handler = type("ControlHandler", (_ControlHandler,), {"processes": processes, "api": api})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, name="realcluster-control", daemon=True).start()
    url_file.parent.mkdir(parents=True, exist_ok=True)
    url_file.write_text(f"http://127.0.0.1:{server.server_address[1]}\n")
    return server


# ---------------------------------------------------------------- sample nodes


def _devcluster_nodes_module() -> Any:
    """The devcluster module that makes `tasq dev`'s sample nodes (found by its functions, wherever the
    devcluster package keeps it), so both clusters get identical nodes from one definition."""
    sys.path.insert(0, str(REPO))
    import devcluster

    wanted = ("topology_nodes", "parse_shape", "nodes_from_dump")
    for name in ("devcluster.nodes", "devcluster.components.nodes", "devcluster.simulated.nodes"):
        with contextlib.suppress(ImportError):
            module = importlib.import_module(name)
            if all(hasattr(module, w) for w in wanted):
                return module
    for info in pkgutil.walk_packages(devcluster.__path__, "devcluster."):
        with contextlib.suppress(ImportError):
            module = importlib.import_module(info.name)
            if all(hasattr(module, w) for w in wanted):
                return module
    raise UpError("no devcluster module defines topology_nodes/parse_shape/nodes_from_dump")


def sample_nodes(topology: str | None, dumps: list[Path]) -> list[dict[str, Any]]:
    """The nodes `tasq dev` would create for these arguments, annotated for kwok to run them."""
    nodes_module = _devcluster_nodes_module()
    if topology is None and not dumps:
        topology = DEFAULT_TOPOLOGY
    nodes: list[dict[str, Any]] = []
    if topology is not None:
        try:
            nodes += nodes_module.topology_nodes(nodes_module.parse_shape(topology), NODE_PREFIX)
        except ValueError as e:
            raise UpError(f"--topology: {e}") from e
    for path in dumps:
        try:
            nodes += nodes_module.nodes_from_dump(path.read_text())
        except (OSError, ValueError) as e:
            raise UpError(f"--nodes {str(path)!r}: {e}") from e
    for node in nodes:
        annotations = node["metadata"].setdefault("annotations", {})
        annotations[KWOK_NODE_ANNOTATION] = KWOK_NODE_VALUE
    return nodes


def create_nodes(api: Api, nodes: list[dict[str, Any]]) -> None:
    """Creates each node; writes its status through the status subresource when create dropped it."""
    for node in nodes:
        name = node["metadata"]["name"]
        code, body = api.request("POST", "/api/v1/nodes", node)
        if code == 409:
            continue  # a later --nodes file repeats a name: the first one stands
        if code != 201:
            raise UpError(f"creating node {name!r}: HTTP {code}: {body}")
        if not (body.get("status") or {}).get("allocatable"):
            code, body = api.request("PATCH", f"/api/v1/nodes/{name}/status", {"status": node["status"]},
                                     "application/merge-patch+json")
            if code != 200:
                raise UpError(f"writing the status of node {name!r}: HTTP {code}: {body}")


# ---------------------------------------------------------------- kwok stages

# Pod lifecycle as the devcluster's kubelet runs it: a bound pod starts Running; with
# `devcluster.tasq.io/fail: "true"` it then Fails (exit 1), otherwise it Succeeds (exit 0) once its
# `devcluster.tasq.io/run-seconds` have passed (a non-negative number; without one it runs until
# deleted); with `devcluster.tasq.io/not-ready: "true"` it runs with Ready=False (a readiness probe
# that never passes); a deleted pod goes at once. Selectors and delays are jq expressions (kwok v1alpha1 Stage).
_FAIL_EXPR = f'(.metadata.annotations["{ANNOTATION_FAIL}"] // "" | ascii_downcase) == "true"'
_NOT_READY_EXPR = f'(.metadata.annotations["{ANNOTATION_NOT_READY}"] // "" | ascii_downcase) == "true"'
_RUN_EXPR = f'[.metadata.annotations["{ANNOTATION_RUN_SECONDS}"] | tonumber? | . >= 0] | any'
_DELAY_EXPR = f'.metadata.annotations["{ANNOTATION_RUN_SECONDS}"] + "s"'


def _terminated_template(phase: str, exit_code: int, reason: str, condition_reason: str) -> str:
    return f"""{{{{ $now := Now }}}}
phase: {phase}
conditions:
- type: Ready
  status: "False"
  reason: {condition_reason}
  lastTransitionTime: {{{{ $now | Quote }}}}
- type: ContainersReady
  status: "False"
  reason: {condition_reason}
  lastTransitionTime: {{{{ $now | Quote }}}}
containerStatuses:
{{{{ range .spec.containers }}}}
- name: {{{{ .name | Quote }}}}
  image: {{{{ .image | Quote }}}}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: {exit_code}
      reason: {reason}
      startedAt: {{{{ $now | Quote }}}}
      finishedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
"""


_RUNNING_TEMPLATE = """{{ $now := Now }}
phase: Running
startTime: {{ $now | Quote }}
conditions:
- type: Initialized
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: Ready
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: ContainersReady
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with .spec.initContainers }}
initContainerStatuses:
{{ range . }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
{{ end }}
{{ with NodeIPWith .spec.nodeName }}
hostIP: {{ . | Quote }}
hostIPs:
- ip: {{ . | Quote }}
{{ end }}
{{ with PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
podIP: {{ . | Quote }}
podIPs:
- ip: {{ . | Quote }}
{{ end }}
"""


# Running, its readiness never passing: Ready and ContainersReady False, containers not ready.
_UNREADY_RUNNING_TEMPLATE = (_RUNNING_TEMPLATE
                             .replace('- type: Ready\n  status: "True"', '- type: Ready\n  status: "False"')
                             .replace('- type: ContainersReady\n  status: "True"',
                                      '- type: ContainersReady\n  status: "False"')
                             .replace("  ready: true\n  started: true", "  ready: false\n  started: true"))


def _stage(name: str, expressions: list[dict[str, Any]], nxt: dict[str, Any],
           delay: dict[str, Any] | None = None, kind: str = "Pod") -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceRef": {"apiGroup": "v1", "kind": kind},
                            "selector": {"matchExpressions": expressions}, "next": nxt}
    if delay is not None:
        spec["delay"] = delay
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


def pod_stages() -> list[dict[str, Any]]:
    """The kwok Stages of the devcluster kubelet's pod lifecycle (see the comment above)."""
    live = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
    running = {"key": ".status.phase", "operator": "In", "values": ["Running"]}
    pending: list[dict[str, Any]] = [live, {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
               {"key": '.status.conditions.[] | select(.type == "Ready") | .status', "operator": "NotIn",
                "values": ["True"]}]
    return [
        _stage("tasq-pod-start", [*pending, {"key": _NOT_READY_EXPR, "operator": "NotIn", "values": ["true"]}],
               {"statusTemplate": _RUNNING_TEMPLATE}),
        _stage("tasq-pod-start-unready", [*pending, {"key": _NOT_READY_EXPR, "operator": "In", "values": ["true"]}],
               {"statusTemplate": _UNREADY_RUNNING_TEMPLATE}),
        _stage("tasq-pod-fail", [live, running, {"key": _FAIL_EXPR, "operator": "In", "values": ["true"]}],
               {"statusTemplate": _terminated_template("Failed", 1, "Error", "PodFailed")}),
        _stage("tasq-pod-succeed", [live, running, {"key": _FAIL_EXPR, "operator": "NotIn", "values": ["true"]},
                                    {"key": _RUN_EXPR, "operator": "In", "values": ["true"]}],
               {"statusTemplate": _terminated_template("Succeeded", 0, "Completed", "PodCompleted")},
               delay={"durationMilliseconds": 0, "durationFrom": {"expressionFrom": _DELAY_EXPR}}),
        _stage("tasq-pod-delete", [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
               {"delete": True}),
        # kwok starts its node controller, which holds the nodes' Leases (so the node lifecycle
        # controller keeps them Ready) and takes their pods, only when some Node stage exists. The
        # nodes keep the status they were created with, as on devcluster: this stage matches none.
        _stage("tasq-node-managed", [{"key": f'.metadata.annotations["{KWOK_NODE_ANNOTATION}"]',
                                      "operator": "In", "values": ["tasq-never-matches"]}], {}, kind="Node"),
    ]


# ---------------------------------------------------------------- the control plane


def component_argv(realcluster: Path, kwok: Path, workdir: Path, ports: Mapping[str, int],
                   profiling: bool = False) -> dict[str, list[str]]:
    """Command lines of every component, in start order (`profiling`: kube-apiserver serves
    /debug/pprof to its admin)."""
    pki, kubeconfig = workdir / "pki", str(workdir / "admin.kubeconfig")
    common = ["--kubeconfig", kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1"]
    return {
        "etcd": [str(realcluster), "etcd", f"--data-dir={workdir / 'etcd'}",
                 f"--listen-client-url=http://127.0.0.1:{ports['etcd']}",
                 f"--listen-peer-url=http://127.0.0.1:{ports['etcd-peer']}"],
        "kube-apiserver": [
            str(realcluster), "kube-apiserver", f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={ports['apiserver']}",
            f"--cert-dir={workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            # the aggregator's identity towards APIServices, as kubeadm sets it up
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=RBAC",
            "--allow-privileged=true", f"--profiling={str(profiling).lower()}",
            # loopback may not be the kubernetes Service's endpoint: no reconciler keeps one
            "--endpoint-reconciler-type=none",
            # The default admission plugins of kube-apiserver (Priority, ServiceAccount, the webhooks...)
            # stay on; nothing is disabled.
        ],
        "kube-controller-manager": [
            str(realcluster), "kube-controller-manager", *common, "--secure-port=0",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=false", "--controllers=*",
            f"--cluster-cidr={POD_CIDR}", f"--service-cluster-ip-range={SERVICE_CIDR}",
        ],
        "kube-scheduler": [str(realcluster), "kube-scheduler", *common, "--secure-port=0"],
        "kwok": [str(kwok), "--kubeconfig", kubeconfig, f"--config={workdir / 'kwok-stages.yaml'}",
                 "--manage-all-nodes=false",
                 f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_VALUE}",
                 f"--cidr={POD_CIDR}", f"--server-address=127.0.0.1:{ports['kwok']}",
                 # kwok renews each node's Lease, so the node lifecycle controller keeps the nodes Ready
                 "--node-lease-duration-seconds=40"],
    }


def apply_crds(kubeconfig: Path, crds: Path, server_side: bool = False) -> None:
    """`kubectl apply` the CRDs of a file or directory and wait until they are Established.
    `server_side` for a CRD too large for client-side apply's last-applied annotation (JobSet's)."""
    kubectl = REPO / ".venv" / "bin" / "kubectl"
    if not kubectl.exists():
        found = shutil.which("kubectl")
        if found is None:
            raise UpError("kubectl not found (.venv/bin/kubectl or PATH) to apply --crds")
        kubectl = Path(found)
    apply = ["apply", "--server-side"] if server_side else ["apply"]
    proc = subprocess.run([str(kubectl), "--kubeconfig", str(kubeconfig), *apply, "-f", str(crds)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise UpError(f"applying {crds}: {proc.stderr.strip()}")
    for _ in range(100):
        proc = subprocess.run([str(kubectl), "--kubeconfig", str(kubeconfig), "wait", "--for=condition=Established",
                               "--timeout=60s", "-f", str(crds)], capture_output=True, text=True)
        if proc.returncode == 0:
            return
        time.sleep(0.2)
    raise UpError(f"CRDs of {crds} not Established: {proc.stderr.strip()}")


# ---------------------------------------------------------------- JobSet


JOBSET_WEBHOOKS = {
    # (configuration kind, webhook name, path, resource): JobSet's own webhook manifests, each
    # served at https://127.0.0.1:<port><path>; the pod hooks only for JobSet's pods, as its
    # kustomize patches select them
    "mutating": [("mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset", "jobsets", ["CREATE"]),
                 ("mpod.kb.io", "/mutate--v1-pod", "pods", ["CREATE"])],
    "validating": [("vjobset.kb.io", "/validate-jobset-x-k8s-io-v1alpha2-jobset", "jobsets", ["CREATE", "UPDATE"]),
                   ("vpod.kb.io", "/validate--v1-pod", "pods", ["CREATE"])],
}
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def jobset_webhook_configurations(port: int, ca_bundle: bytes) -> list[tuple[str, dict[str, Any]]]:
    """JobSet's Mutating- and ValidatingWebhookConfiguration, pointing at its controller on loopback:
    (collection path, object). Its defaulting is needed: the controller reads the defaults it sets."""
    import base64

    out: list[tuple[str, dict[str, Any]]] = []
    for kind, hooks in JOBSET_WEBHOOKS.items():
        webhooks = []
        for name, path, resource, operations in hooks:
            hook: dict[str, Any] = {
                "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}",
                                 "caBundle": base64.b64encode(ca_bundle).decode()},
                "rules": [{"apiGroups": ["jobset.x-k8s.io" if resource == "jobsets" else ""],
                           "apiVersions": ["v1alpha2" if resource == "jobsets" else "v1"],
                           "operations": operations, "resources": [resource]}]}
            if resource == "pods":
                hook["objectSelector"] = {"matchExpressions": [{"key": JOBSET_NAME_LABEL, "operator": "Exists"}]}
            webhooks.append(hook)
        plural = f"{kind}webhookconfigurations"
        out.append((f"/apis/admissionregistration.k8s.io/v1/{plural}", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": f"{kind.capitalize()}WebhookConfiguration",
            "metadata": {"name": f"jobset-{kind}-webhook-configuration"}, "webhooks": webhooks}))
    return out


def start_jobset(processes: Processes, api: Api, workdir: Path, jobset: Path, crd: Path) -> None:
    """JobSet's CRD, then its controller out of cluster (admin kubeconfig, no leader election, no
    metrics, its webhooks on loopback with the apiserver's serving certificate, which names
    127.0.0.1), then its webhook configurations once it is ready."""
    apply_crds(workdir / "admin.kubeconfig", crd, server_side=True)
    certs = workdir / "jobset-certs"
    certs.mkdir()
    shutil.copyfile(workdir / "pki" / "apiserver.crt", certs / "tls.crt")
    shutil.copyfile(workdir / "pki" / "apiserver.key", certs / "tls.key")
    webhook_port, health_port = free_port(), free_port()
    config = {"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
              "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
              "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(certs)},
              "metrics": {"bindAddress": "0"},
              "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"}}
    (workdir / "jobset-config.yaml").write_text(json.dumps(config, indent=2) + "\n")
    processes.start("jobset-controller", [str(jobset), f"--kubeconfig={workdir / 'admin.kubeconfig'}",
                                          f"--config={workdir / 'jobset-config.yaml'}"])

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False
    wait_for("JobSet's controller (/readyz)", ready, processes)
    for path, body in jobset_webhook_configurations(webhook_port, (workdir / "pki" / "ca.crt").read_bytes()):
        code, answer = api.request("POST", path, body)
        if code != 201:
            raise UpError(f"creating {body['kind']} {body['metadata']['name']}: HTTP {code}: {answer}")


@contextlib.contextmanager
def control_plane(args: argparse.Namespace) -> Iterator[Processes]:
    """Builds (if needed), starts everything, writes the kubeconfig; yields the running processes;
    stops every process and removes the temporary directory on exit."""
    started = time.monotonic()
    nodes = sample_nodes(args.topology, args.nodes)  # bad arguments fail before a long build
    realcluster, kwok = ensure_binaries(args.cache_dir)
    jobset = ensure_jobset(args.cache_dir) if args.jobset else None
    built = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="tasq-realcluster-"))
    processes = Processes(workdir)
    try:
        (workdir / "pki").mkdir()
        write_certificates(workdir / "pki")
        ports = {name: free_port() for name in ("etcd", "etcd-peer", "apiserver", "kwok")}
        server = f"https://127.0.0.1:{ports['apiserver']}"
        (workdir / "admin.kubeconfig").write_text(kubeconfig_text(workdir / "pki", server))
        (workdir / "kwok-stages.yaml").write_text("\n---\n".join(json.dumps(s) for s in pod_stages()) + "\n")
        argv = component_argv(realcluster, kwok, workdir, ports, args.profiling)
        processes.start("etcd", argv["etcd"])
        wait_for("etcd", lambda: _port_open(ports["etcd"]), processes)
        processes.start("kube-apiserver", argv["kube-apiserver"])
        api = Api(server, workdir / "pki")
        wait_for("kube-apiserver", lambda: api.ok("/readyz"), processes)
        for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
            processes.start(name, argv[name])
        create_nodes(api, nodes)
        if args.crds is not None:
            apply_crds(workdir / "admin.kubeconfig", args.crds)
        if jobset is not None:
            start_jobset(processes, api, workdir, *jobset)
        # Pods of a namespace are refused until its default ServiceAccount exists: the controller
        # manager is working once the default namespace has one.
        wait_for("the default ServiceAccount", lambda: api.ok("/api/v1/namespaces/default/serviceaccounts/default"),
                 processes)
        args.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        args.kubeconfig.write_text(kubeconfig_text(workdir / "pki", server))
        if args.front_proxy_dir is not None:  # for tests that call an APIService's server as the aggregator
            args.front_proxy_dir.mkdir(parents=True, exist_ok=True)
            for name in ("front-proxy-ca.crt", "front-proxy-client.crt", "front-proxy-client.key"):
                shutil.copyfile(workdir / "pki" / name, args.front_proxy_dir / name)
        if args.control is not None:
            serve_control(processes, api, args.control)
        processes.check()
        log(f"started in {time.monotonic() - built:.1f}s ({time.monotonic() - started:.1f}s with the build "
            f"check); {len(nodes)} nodes; logs in {workdir}")
        yield processes
    finally:
        # a second signal must not cut the clean-up short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        processes.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class _Stop(Exception):
    pass


def _raise_stop(signum: int, _frame: FrameType | None) -> None:
    raise _Stop(signum)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hack/realcluster/up", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, required=False, help="where to write the admin kubeconfig")
    parser.add_argument("--topology", default=None,
                        help=f"sample GPU nodes as BLOCKSxRACKSxNODESxGPUS, as `tasq dev` (default: "
                             f"{DEFAULT_TOPOLOGY}, none when --nodes is given)")
    parser.add_argument("--nodes", type=Path, action="append", default=[], metavar="FILE",
                        help="also create the nodes of a `kubectl get nodes -o yaml` dump (repeatable)")
    parser.add_argument("--crds", type=Path, default=REPO / "crds", help="directory of CRD YAML to apply")
    parser.add_argument("--no-crds", dest="crds", action="store_const", const=None, help="apply no CRDs")
    parser.add_argument("--control", type=Path, default=None, metavar="FILE",
                        help="serve the control endpoint (POST /restart?component=kube-apiserver|etcd"
                             "[&signal=TERM|KILL][&down=SECONDS]) on loopback and write its URL to FILE")
    parser.add_argument("--front-proxy-dir", type=Path, default=None, metavar="DIR",
                        help="copy the aggregator's client certificate and key (front-proxy-client.crt/.key) "
                             "and its CA here, to call an APIService's server as kube-apiserver does")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(os.environ.get("TASQ_REALCLUSTER_CACHE")
                                     or Path.home() / ".cache" / "tasq" / "realcluster"),
                        help="where built binaries are kept, one directory per pin set "
                             "(env TASQ_REALCLUSTER_CACHE)")
    parser.add_argument("--jobset", action="store_true",
                        help="also install JobSet's CRD and run its controller (sigs.k8s.io/jobset, pinned in "
                             "jobset/go.mod), its webhooks served on loopback")
    parser.add_argument("--profiling", action="store_true",
                        help="kube-apiserver serves /debug/pprof (CPU and heap profiles) to the admin kubeconfig")
    parser.add_argument("--build-only", action="store_true",
                        help="build (when needed), print the binaries (with --jobset JobSet's too), exit")
    args = parser.parse_args(argv)
    if not args.build_only and args.kubeconfig is None:
        parser.error("--kubeconfig is required (unless --build-only)")
    if args.kubeconfig is not None and args.kubeconfig.is_dir():
        parser.error(f"--kubeconfig {str(args.kubeconfig)!r} is a directory; give a file path")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    try:
        if args.build_only:
            for path in ensure_binaries(args.cache_dir):
                print(path)
            if args.jobset:
                for path in ensure_jobset(args.cache_dir):
                    print(path)
            return 0
        with control_plane(args) as processes:
            print("ready", flush=True)
            while True:
                time.sleep(1)
                processes.check()
    except _Stop as stop:
        log(f"stopped by signal {stop.args[0]}")
        return 0
    except UpError as e:
        log(str(e))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
