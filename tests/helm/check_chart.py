#!/usr/bin/env python3
"""Renders helm/claimguard with the values files in helm/claimguard/ci and checks the manifests.

Run one group:  python3 check_chart.py WebhookCertManager   (unittest names; no name: all)
Environment:    HELM (default: scripts/fetch_helm.sh fetches it), INJECT_RENDER (the test
                helper that prints what the webhook injects), CLAIMGUARD (the binary, for lint).
Needs python3-yaml (Debian) for parsing the rendered YAML.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import unittest

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(ROOT, "helm", "claimguard")
CI = os.path.join(CHART, "ci")
NAMESPACE = "claimguard-system"
RELEASE = "cg"
INJECTOR = "cg-claimguard-inject"  # <release>-<chart>-inject


def helm_path():
    if os.environ.get("HELM"):
        return os.environ["HELM"]
    out = subprocess.run([os.path.join(ROOT, "scripts", "fetch_helm.sh"), "helm"], check=True,
                         stdout=subprocess.PIPE, text=True)
    return out.stdout.strip()


HELM = None


def helm(*args, check=True):
    global HELM
    if HELM is None:
        HELM = helm_path()
    return subprocess.run([HELM, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=check)


def render(values=None, kube_version=None, sets=(), set_json=(), api_versions=()):
    args = ["template", RELEASE, CHART, "--namespace", NAMESPACE]
    if values:
        args += ["-f", os.path.join(CI, values)]
    if kube_version:
        args += ["--kube-version", kube_version]
    for s in sets:
        args += ["--set", s]
    for s in set_json:
        args += ["--set-json", s]
    for a in api_versions:
        args += ["--api-versions", a]
    out = helm(*args)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def render_error(values=None, sets=(), set_json=()):
    args = ["template", RELEASE, CHART, "--namespace", NAMESPACE]
    if values:
        args += ["-f", os.path.join(CI, values)]
    for s in sets:
        args += ["--set", s]
    for s in set_json:
        args += ["--set-json", s]
    out = helm(*args, check=False)
    return out.returncode, out.stderr


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def one(docs, kind):
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def arg_after(args, flag):
    """Values that follow `flag` in an argument list (a flag may repeat)."""
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


HARDENED = {
    "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


class Lint(unittest.TestCase):
    def test_lint_strict_default_and_every_ci_values_file(self):
        for values in [None] + sorted(os.listdir(CI)):
            args = ["lint", "--strict", CHART, "--namespace", NAMESPACE]
            if values:
                args += ["-f", os.path.join(CI, values)]
            out = helm(*args, check=False)
            self.assertEqual(out.returncode, 0, f"{values}: {out.stdout}{out.stderr}")
            self.assertIn("0 chart(s) failed", out.stdout)


class WebhookCertManager(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = render("webhook-cert-manager-values.yaml", kube_version="1.30.2")

    def test_objects(self):
        kinds = sorted(d["kind"] for d in self.docs)
        self.assertEqual(kinds, sorted(["ServiceAccount", "ConfigMap", "ConfigMap", "Service", "Deployment",
                                        "MutatingWebhookConfiguration", "Certificate", "Issuer",
                                        "PodDisruptionBudget"]))
        self.assertEqual(by_kind(self.docs, "Secret"), [], "cert-manager owns the TLS Secret")
        for d in self.docs:
            if d["kind"] != "MutatingWebhookConfiguration":
                self.assertIn(d["metadata"]["namespace"], (NAMESPACE, "shop"), d["kind"])

    def test_rules_configmap_in_the_release_and_app_namespaces(self):
        maps = by_kind(self.docs, "ConfigMap")
        self.assertEqual(sorted(m["metadata"]["namespace"] for m in maps), sorted([NAMESPACE, "shop"]))
        for m in maps:
            self.assertEqual(m["metadata"]["name"], "claimguard-rules")
            rules = yaml.safe_load(m["data"]["coupon.yaml"])
            self.assertEqual(rules["stock_rules"][0]["counter_column"], "remain")

    def test_webhook_configuration_points_at_the_service_with_the_certificate_ca(self):
        hook = one(self.docs, "MutatingWebhookConfiguration")
        cert = one(self.docs, "Certificate")
        service = one(self.docs, "Service")
        self.assertEqual(hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                         f"{NAMESPACE}/{cert['metadata']['name']}")
        names = [w["name"] for w in hook["webhooks"]]
        self.assertEqual(names, ["pods.inject.claimguard.io", "namespaces.inject.claimguard.io"])
        paths = {}
        for w in hook["webhooks"]:
            svc = w["clientConfig"]["service"]
            self.assertEqual((svc["name"], svc["namespace"], svc["port"]),
                             (service["metadata"]["name"], NAMESPACE, service["spec"]["ports"][0]["port"]))
            self.assertNotIn("caBundle", w["clientConfig"], "cert-manager's cainjector fills it")
            paths[w["name"]] = svc["path"]
            self.assertEqual(w["failurePolicy"], "Ignore")
            self.assertEqual(w["sideEffects"], "None")
            self.assertEqual(w["admissionReviewVersions"], ["v1"])
            self.assertEqual(w["reinvocationPolicy"], "Never")
            self.assertEqual(w["rules"], [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                           "resources": ["pods"], "scope": "Namespaced"}])
            exprs = w["namespaceSelector"]["matchExpressions"]
            excluded = [e for e in exprs if e["key"] == "kubernetes.io/metadata.name"][0]
            self.assertEqual(excluded["operator"], "NotIn")
            self.assertEqual(sorted(excluded["values"]), sorted(["kube-system", "monitoring", NAMESPACE]))
            self.assertEqual(w["objectSelector"]["matchExpressions"],
                             [{"key": "claimguard.io/injector", "operator": "DoesNotExist"}])
            # Service paths: every segment a DNS-1123 subdomain, no query (API server validation).
            self.assertNotIn("?", svc["path"])
        self.assertEqual(paths, {"pods.inject.claimguard.io": "/mutate",
                                 "namespaces.inject.claimguard.io": "/mutate/namespace"})
        ops = {w["name"]: [e for e in w["namespaceSelector"]["matchExpressions"] if e["key"] == "claimguard.io/inject"]
               for w in hook["webhooks"]}
        self.assertEqual(ops["pods.inject.claimguard.io"], [{"key": "claimguard.io/inject", "operator": "NotIn", "values": ["enabled"]}])
        self.assertEqual(ops["namespaces.inject.claimguard.io"], [{"key": "claimguard.io/inject", "operator": "In", "values": ["enabled"]}])
        # 1.30: the annotation-only entry filters with matchConditions; the namespace entry must not.
        self.assertIn("matchConditions", hook["webhooks"][0])
        self.assertNotIn("matchConditions", hook["webhooks"][1])

    def test_certificate_names_the_service_and_feeds_the_deployment(self):
        cert = one(self.docs, "Certificate")
        issuer = one(self.docs, "Issuer")
        service = one(self.docs, "Service")
        deploy = one(self.docs, "Deployment")
        name = service["metadata"]["name"]
        self.assertEqual(cert["spec"]["dnsNames"], [name, f"{name}.{NAMESPACE}", f"{name}.{NAMESPACE}.svc",
                                                    f"{name}.{NAMESPACE}.svc.cluster.local"])
        self.assertEqual(cert["spec"]["issuerRef"]["name"], issuer["metadata"]["name"])
        self.assertEqual(issuer["spec"], {"selfSigned": {}})
        volumes = deploy["spec"]["template"]["spec"]["volumes"]
        self.assertEqual(volumes, [{"name": "tls", "secret": {"secretName": cert["spec"]["secretName"]}}])

    def test_deployment_runs_inject_with_the_values_as_flags(self):
        deploy = one(self.docs, "Deployment")
        pod = deploy["spec"]["template"]
        self.assertEqual(deploy["spec"]["replicas"], 3)
        self.assertEqual(pod["metadata"]["labels"]["claimguard.io/injector"], "true")
        self.assertEqual(pod["spec"]["imagePullSecrets"], [{"name": "regcred"}])
        self.assertFalse(pod["spec"]["automountServiceAccountToken"])
        (c,) = pod["spec"]["containers"]
        args = c["args"]
        self.assertEqual(args[0], "inject")
        self.assertEqual(arg_after(args, "--k8s-version"), ["v1.30.2"])
        self.assertEqual(arg_after(args, "--image"), ["registry.example/claimguard:0.1.0"])
        self.assertEqual(arg_after(args, "--exclude-namespace"), ["kube-system", "monitoring"])
        self.assertEqual(arg_after(args, "--default-backend"), ["mysql.shop.svc.cluster.local:3306"])
        self.assertEqual(arg_after(args, "--default-redis"), ["redis.shop.svc.cluster.local:6379"])
        self.assertEqual(arg_after(args, "--default-rules-configmap"), ["claimguard-rules"])
        self.assertEqual(arg_after(args, "--cpu-limit"), ["1"])
        self.assertEqual(arg_after(args, "--memory-limit"), ["128Mi"])
        self.assertEqual([a for a in args if a.startswith("--sidecar-arg=")],
                         ["--sidecar-arg=--log-level", "--sidecar-arg=debug"])
        self.assertEqual(c["securityContext"], HARDENED)
        self.assertEqual(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.namespace")
        self.assertEqual(c["readinessProbe"]["httpGet"], {"path": "/healthz", "port": "https", "scheme": "HTTPS"})
        self.assertEqual(arg_after(args, "--listen"), [f"0.0.0.0:{c['ports'][0]['containerPort']}"])
        service = one(self.docs, "Service")
        self.assertEqual(service["spec"]["ports"][0]["targetPort"], c["ports"][0]["name"])
        for k, v in service["spec"]["selector"].items():
            self.assertEqual(pod["metadata"]["labels"][k], v)

    def test_pod_disruption_budget_selects_the_injector(self):
        pdb = one(self.docs, "PodDisruptionBudget")
        labels = one(self.docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
        for k, v in pdb["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(labels[k], v)


class WebhookHelmCerts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = render("webhook-helm-certs-values.yaml")

    def test_objects(self):
        kinds = sorted(d["kind"] for d in self.docs)
        self.assertEqual(kinds, sorted(["ServiceAccount", "Secret", "Service", "Deployment",
                                        "MutatingWebhookConfiguration"]))

    def test_ca_bundle_verifies_the_serving_certificate_for_the_service_name(self):
        secret = one(self.docs, "Secret")
        hook = one(self.docs, "MutatingWebhookConfiguration")
        deploy = one(self.docs, "Deployment")
        self.assertEqual(secret["type"], "kubernetes.io/tls")
        self.assertEqual(deploy["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
                         secret["metadata"]["name"])
        self.assertNotIn("annotations", hook["metadata"])
        for w in hook["webhooks"]:
            self.assertEqual(w["clientConfig"]["caBundle"], secret["data"]["ca.crt"])
            self.assertEqual(w["failurePolicy"], "Fail")
            self.assertNotIn("matchConditions", w, "1.28 has no GA matchConditions")
        with tempfile.TemporaryDirectory() as d:
            for key in ("tls.crt", "tls.key", "ca.crt"):
                with open(os.path.join(d, key), "wb") as f:
                    f.write(base64.b64decode(secret["data"][key]))
            host = f"{INJECTOR}.{NAMESPACE}.svc"
            ok = subprocess.run(["openssl", "verify", "-purpose", "sslserver", "-verify_hostname", host,
                                 "-CAfile", os.path.join(d, "ca.crt"), os.path.join(d, "tls.crt")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertEqual(ok.returncode, 0, ok.stdout)
            bad = subprocess.run(["openssl", "verify", "-verify_hostname", "evil.example", "-CAfile",
                                  os.path.join(d, "ca.crt"), os.path.join(d, "tls.crt")],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertNotEqual(bad.returncode, 0, "the certificate must not be valid for other names")
            # The key matches the certificate.
            pub_cert = subprocess.run(["openssl", "x509", "-noout", "-pubkey", "-in", os.path.join(d, "tls.crt")],
                                      stdout=subprocess.PIPE, check=True).stdout
            pub_key = subprocess.run(["openssl", "pkey", "-pubout", "-in", os.path.join(d, "tls.key")],
                                     stdout=subprocess.PIPE, check=True).stdout
            self.assertEqual(pub_cert, pub_key)

    def test_plain_sidecars_for_1_28_and_no_pdb_for_one_replica(self):
        args = one(self.docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertEqual(arg_after(args, "--k8s-version"), ["1.28"])
        self.assertEqual(by_kind(self.docs, "PodDisruptionBudget"), [])
        self.assertEqual(by_kind(self.docs, "ConfigMap"), [], "rules.create: false")


def workload_values():
    with open(os.path.join(CI, "sidecar-values.yaml")) as f:
        return yaml.safe_load(f)["workload"]


class SidecarNative(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = render("sidecar-values.yaml", kube_version="1.29.0")

    def test_objects(self):
        self.assertEqual(sorted(d["kind"] for d in self.docs), ["ConfigMap", "Deployment"])

    def test_sidecar_is_the_first_init_container_and_the_app_is_unchanged(self):
        deploy = one(self.docs, "Deployment")
        wl = workload_values()
        spec = deploy["spec"]["template"]["spec"]
        self.assertEqual(deploy["metadata"]["name"], "coupon-api")
        self.assertEqual(deploy["spec"]["replicas"], 3)
        self.assertEqual(spec["containers"], wl["containers"])
        self.assertEqual(spec["initContainers"][1:], wl["initContainers"])
        sidecar = spec["initContainers"][0]
        self.assertEqual(sidecar["name"], "claimguard")
        self.assertEqual(sidecar["restartPolicy"], "Always")
        self.assertNotIn("lifecycle", sidecar)
        self.assertEqual(sidecar["securityContext"], HARDENED)
        self.assertEqual(sidecar["args"][:5], ["serve", "--listen", "127.0.0.1:3306", "--backend", wl["backend"]])
        self.assertEqual(arg_after(sidecar["args"], "--redis"), [wl["redis"]])
        self.assertEqual(sidecar["args"][-2:], ["--log-level", "debug"])
        self.assertEqual(spec["volumes"], wl["volumes"] + [{"name": "claimguard-rules",
                                                             "configMap": {"name": "claimguard-rules"}}])
        meta = deploy["spec"]["template"]["metadata"]
        self.assertEqual(meta["annotations"]["claimguard.io/status"], "injected")
        self.assertEqual(meta["annotations"]["prometheus.io/scrape"], "true")
        self.assertEqual(meta["labels"]["app"], "coupon-api")
        for k, v in deploy["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(meta["labels"][k], v)
        self.assertEqual(spec["serviceAccountName"], "coupon-api")


class SidecarPlain(unittest.TestCase):
    def check_plain(self, docs):
        """Held (sidecar.holdApplicationUntilReady, the default): first, with a postStart wait."""
        deploy = one(docs, "Deployment")
        spec = deploy["spec"]["template"]["spec"]
        wl = workload_values()
        self.assertEqual(spec["initContainers"], wl["initContainers"])
        self.assertEqual(spec["containers"][1:], wl["containers"])
        sidecar = spec["containers"][0]
        self.assertEqual(sidecar["name"], "claimguard")
        self.assertNotIn("restartPolicy", sidecar)
        self.assertEqual(sidecar["lifecycle"]["preStop"], {"exec": {"command": [
            "/usr/local/bin/claimguard", "shutdown", "--control", "127.0.0.1:9091"]}})
        command = sidecar["lifecycle"]["postStart"]["exec"]["command"]
        self.assertEqual(command[:2], ["/bin/bash", "-c"])
        self.assertIn("exec 3<>/dev/tcp/127.0.0.1/9090", command[2])
        self.assertIn("printf 'GET /startup HTTP/1.0\\r\\n\\r\\n' >&3", command[2])
        annotations = deploy["spec"]["template"]["metadata"]["annotations"]
        self.assertEqual(annotations["kubectl.kubernetes.io/default-container"], wl["containers"][0]["name"])

    def test_control_port_setting_moves_the_flag_and_the_pre_stop_hook(self):
        """Issue 22: sidecar.controlPort (default 9091) is the sidecar's --control and the preStop hook's target."""
        spec = one(render("sidecar-values.yaml", kube_version="1.28.9", sets=["sidecar.controlPort=9191"]),
                   "Deployment")["spec"]["template"]["spec"]
        sidecar = spec["containers"][0]
        self.assertEqual(arg_after(sidecar["args"], "--control"), ["127.0.0.1:9191"])
        self.assertEqual(sidecar["lifecycle"]["preStop"]["exec"]["command"][-1], "127.0.0.1:9191")

    def test_hold_off_puts_the_sidecar_last_without_a_post_start(self):
        docs = render("sidecar-values.yaml", kube_version="1.28.9", sets=["sidecar.holdApplicationUntilReady=false"])
        deploy = one(docs, "Deployment")
        spec = deploy["spec"]["template"]["spec"]
        self.assertEqual(spec["containers"][:-1], workload_values()["containers"])
        self.assertEqual(list(spec["containers"][-1]["lifecycle"]), ["preStop"])
        self.assertNotIn("kubectl.kubernetes.io/default-container", deploy["spec"]["template"]["metadata"]["annotations"])

    def test_the_post_start_wait_really_waits_for_startup(self):
        """Runs the rendered hook against a local HTTP server that answers 503 twice, then 200."""
        import http.server
        import threading
        answers = [503, 503, 200]

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(answers.pop(0) if len(answers) > 1 else answers[0])
                self.end_headers()

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            docs = render("sidecar-values.yaml", kube_version="1.28.9",
                          sets=[f"sidecar.admin.port={server.server_port}"])
            command = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["postStart"]
            out = subprocess.run(command["exec"]["command"], timeout=30, stderr=subprocess.PIPE, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(answers, [200], "the hook returned before /startup answered 200")
        finally:
            server.shutdown()

    def test_kubernetes_1_28_gets_a_plain_container(self):
        self.check_plain(render("sidecar-values.yaml", kube_version="1.28.9"))

    def test_native_never_forces_a_plain_container(self):
        self.check_plain(render("sidecar-values.yaml", kube_version="1.31.0", sets=["sidecar.native=never"]))

    def test_native_always_forces_a_native_sidecar(self):
        docs = render("sidecar-values.yaml", kube_version="1.28.9", sets=["sidecar.native=always"])
        spec = one(docs, "Deployment")["spec"]["template"]["spec"]
        self.assertEqual(spec["initContainers"][0]["restartPolicy"], "Always")


class SidecarUnixSocket(unittest.TestCase):
    """sidecar.unixSocket (issue 11): --listen-unix, an emptyDir mounted at the socket's directory."""

    def test_flag_volume_and_mount(self):
        docs = render("sidecar-values.yaml", kube_version="1.28.9",
                      sets=["sidecar.unixSocket=/var/run/claimguard/mysql.sock"])
        spec = one(docs, "Deployment")["spec"]["template"]["spec"]
        sidecar = spec["containers"][0]  # held: first
        args = sidecar["args"]
        self.assertEqual(args[args.index("--listen-unix") + 1], "/var/run/claimguard/mysql.sock")
        self.assertIn({"name": "claimguard-socket", "mountPath": "/var/run/claimguard"}, sidecar["volumeMounts"])
        self.assertIn({"name": "claimguard-socket", "emptyDir": {"medium": "Memory"}}, spec["volumes"])

    def test_webhook_mode_passes_it_to_the_injector_and_relative_paths_are_refused(self):
        args = one(render(sets=["sidecar.unixSocket=/var/run/claimguard/mysql.sock"]),
                   "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertEqual(arg_after(args, "--sidecar-unix-socket"), ["/var/run/claimguard/mysql.sock"])
        code, err = render_error("sidecar-values.yaml", sets=["sidecar.unixSocket=mysql.sock"])
        self.assertNotEqual(code, 0, err)

    def test_off_by_default(self):
        spec = one(render("sidecar-values.yaml", kube_version="1.28.9"), "Deployment")["spec"]["template"]["spec"]
        self.assertNotIn("--listen-unix", spec["containers"][0]["args"])
        self.assertNotIn("claimguard-socket", [v["name"] for v in spec["volumes"]])


class SidecarRedis(unittest.TestCase):
    """redis.*: a cluster's seed nodes, an ACL user, the password and TLS files from Secrets (issue 12)."""

    SETS = ["redis.cluster=true", "workload.redis=redis-0.redis:6379\\,redis-1.redis:6379", "redis.user=claimguard",
            "redis.passwordSecret.name=redis-auth", "redis.passwordSecret.key=pw", "redis.tls.enabled=true",
            "redis.tls.secret=redis-tls", "redis.tls.clientCertificate=true", "redis.tls.serverName=redis.shop"]

    def test_flags_mounts_and_secret_volumes(self):
        spec = one(render("sidecar-values.yaml", kube_version="1.30.0", sets=self.SETS),
                   "Deployment")["spec"]["template"]["spec"]
        args = spec["initContainers"][0]["args"]
        self.assertEqual(arg_after(args, "--redis"), ["redis-0.redis:6379,redis-1.redis:6379"])
        # Switches bare: the value after them is the next flag, never "true".
        self.assertEqual(arg_after(args, "--redis-cluster"), ["--redis-user"])
        self.assertIn("--redis-tls", args)
        self.assertNotIn("true", args)
        self.assertEqual(arg_after(args, "--redis-user"), ["claimguard"])
        self.assertEqual(arg_after(args, "--redis-password-file"), ["/etc/claimguard/redis-auth/pw"])
        self.assertNotIn("--no-redis-tls-verify", args)  # verify is the default: nothing written
        self.assertEqual(arg_after(args, "--redis-tls-ca"), ["/etc/claimguard/redis-tls/ca.crt"])
        self.assertEqual(arg_after(args, "--redis-tls-cert"), ["/etc/claimguard/redis-tls/tls.crt"])
        self.assertEqual(arg_after(args, "--redis-tls-server-name"), ["redis.shop"])
        self.assertFalse(any("password" in a and "file" not in a and "/" not in a for a in args[1:]),
                         "the password is never a flag")
        mounts = {m["name"]: m["mountPath"] for m in spec["initContainers"][0]["volumeMounts"]}
        self.assertEqual(mounts["claimguard-redis-auth"], "/etc/claimguard/redis-auth")
        self.assertEqual(mounts["claimguard-redis-tls"], "/etc/claimguard/redis-tls")
        volumes = {v["name"]: v for v in spec["volumes"]}
        self.assertEqual(volumes["claimguard-redis-auth"]["secret"],
                         {"secretName": "redis-auth", "items": [{"key": "pw", "path": "pw"}]})
        self.assertEqual(volumes["claimguard-redis-tls"]["secret"], {"secretName": "redis-tls"})

    def test_defaults_add_nothing(self):
        spec = one(render("sidecar-values.yaml", kube_version="1.30.0"), "Deployment")["spec"]["template"]["spec"]
        args = spec["initContainers"][0]["args"]
        self.assertFalse([a for a in args if a.startswith("--redis-")])
        self.assertFalse([v for v in spec["volumes"] if v["name"].startswith("claimguard-redis")])


class SchemaAndChecks(unittest.TestCase):
    """Values the chart must refuse, each with the reason helm prints."""

    CASES = [
        ("unknown mode", None, ["mode=daemonset"], [], "mode"),
        ("unknown top-level key", None, ["replicaCount=2"], [], "replicaCount"),
        ("unknown sidecar key", None, ["sidecar.port=3306"], [], "port"),
        ("gpu in resources", None, [], ['sidecar.resources={"requests":{"gpu":"1"}}'], "gpu"),
        ("bad quantity", None, ["sidecar.resources.limits.memory=lots"], [], "memory"),
        ("backend without port", None, ["webhook.defaults.backend=mysql"], [], "backend"),
        ("bad failure policy", None, ["webhook.failurePolicy=Retry"], [], "failurePolicy"),
        ("bad certificate mode", None, ["webhook.certificates.mode=vault"], [], "mode"),
        ("upper-case ConfigMap", None, ["rules.name=Rules"], [], "name"),
        ("rules file not yaml", None, [], ['rules.files={"coupon.txt":"x"}'], "coupon.txt"),
        ("native forced in webhook mode", None, ["sidecar.native=never"], [], "sidecar.native applies to mode: sidecar"),
        ("sidecar mode without containers", None, ["mode=sidecar", "workload.backend=db:3306"], [],
         "needs workload.containers"),
        ("sidecar mode without backend", "sidecar-values.yaml", ["workload.backend="], [], "needs workload.backend"),
        ("secret env in webhook mode", None, [],
         ['sidecar.env=[{"name":"X","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}}]'], "plain values only"),
        ("bad env name", None, [], ['sidecar.env=[{"name":"1X","value":"v"}]'], "name"),
        ("unknown monitoring key", None, ["monitoring.grafana=true"], [], "grafana"),
        ("bad pod monitor interval", None, ["monitoring.podMonitor.interval=often"], [], "interval"),
        ("redis client certificate without a secret in webhook mode", None,
         ["redis.tls.enabled=true", "redis.tls.clientCertificate=true"], [], "needs redis.tls.secret"),
        ("redis seed list without cluster", "sidecar-values.yaml", ["workload.redis=a:1\\,b:2"], [],
         "set redis.cluster: true"),
        ("redis client certificate without a secret", "sidecar-values.yaml",
         ["redis.tls.enabled=true", "redis.tls.clientCertificate=true"], [], "needs redis.tls.secret"),
        ("unknown redis key", None, ["redis.password=x"], [], "password"),
        ("container already named claimguard", "sidecar-values.yaml", [],
         ['workload.containers=[{"name":"claimguard","image":"x"}]'], "already named claimguard"),
    ]

    def test_refused(self):
        for name, values, sets, set_json, reason in self.CASES:
            with self.subTest(name):
                code, err = render_error(values, sets, set_json)
                self.assertNotEqual(code, 0, f"{name}: rendered")
                self.assertIn(reason, err, f"{name}: {err}")


class SidecarMatchesWebhook(unittest.TestCase):
    """The chart's sidecar mode renders, field for field, the container the webhook injects when
    run with the flags the chart's webhook mode passes (same values)."""

    def render_pair(self, kube_version, extra_sets, set_json=()):
        sets = ["image.repository=registry.example/claimguard", "image.tag=0.1.0",
                "webhook.defaults.backend=mysql.shop.svc:3306", "webhook.defaults.redis=redis.shop.svc:6379",
                "webhook.defaults.rulesConfigMap=coupon-rules", "sidecar.extraArgs={--log-level,debug}"] + extra_sets
        webhook = render(None, kube_version=kube_version, sets=sets, set_json=set_json)
        inject_args = one(webhook, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"][1:]
        sidecar = render("sidecar-values.yaml", kube_version=kube_version,
                         sets=sets + ["workload.backend=mysql.shop.svc:3306", "workload.redis=redis.shop.svc:6379",
                                      "workload.rulesConfigMap=coupon-rules"], set_json=set_json)
        chart_pod = one(sidecar, "Deployment")["spec"]["template"]["spec"]
        app_pod = {"metadata": {"name": "coupon-api-0", "annotations": {"claimguard.io/inject": "true"}},
                   "spec": {"containers": workload_values()["containers"]}}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(app_pod, f)
            pod_file = f.name
        try:
            out = subprocess.run([os.environ["INJECT_RENDER"], *inject_args, "--pod", pod_file,
                                  "--pod-namespace", "shop"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        finally:
            os.unlink(pod_file)
        self.assertEqual(out.returncode, 0, out.stderr)
        injected = json.loads(out.stdout)
        return chart_pod, injected

    def normalise(self, container):
        # YAML numbers and strings for quantities mean the same to Kubernetes.
        c = json.loads(json.dumps(container))
        for section in c.get("resources", {}).values():
            for k in section:
                section[k] = str(section[k])
        return c

    @unittest.skipUnless(os.environ.get("INJECT_RENDER"), "INJECT_RENDER not set")
    def test_native(self):
        chart_pod, injected = self.render_pair("1.30.0", [])
        self.assertEqual(self.normalise(chart_pod["initContainers"][0]),
                         self.normalise(injected["spec"]["initContainers"][0]))
        self.assertEqual(chart_pod["volumes"][-1], injected["spec"]["volumes"][-1])

    @unittest.skipUnless(os.environ.get("INJECT_RENDER"), "INJECT_RENDER not set")
    def test_plain_with_custom_ports_resources_and_args(self):
        extra = ["sidecar.listenPort=3307", "sidecar.admin.port=9191", "sidecar.resources.limits.cpu=2",
                 "sidecar.resources.requests=null", "sidecar.runAsUser=1001",
                 "sidecar.rulesMountPath=/rules"]
        chart_pod, injected = self.render_pair("1.28.0", extra)
        # Held by default: the sidecar first, with the same postStart wait.
        self.assertEqual(self.normalise(chart_pod["containers"][0]),
                         self.normalise(injected["spec"]["containers"][0]))
        self.assertIn("postStart", chart_pod["containers"][0]["lifecycle"])

    @unittest.skipUnless(os.environ.get("INJECT_RENDER"), "INJECT_RENDER not set")
    def test_plain_not_held(self):
        chart_pod, injected = self.render_pair("1.28.0", ["sidecar.holdApplicationUntilReady=false"])
        self.assertEqual(self.normalise(chart_pod["containers"][-1]),
                         self.normalise(injected["spec"]["containers"][-1]))
        self.assertNotIn("postStart", chart_pod["containers"][-1]["lifecycle"])

    @unittest.skipUnless(os.environ.get("INJECT_RENDER"), "INJECT_RENDER not set")
    def test_redis_socket_env_and_schema_check_secret(self):
        """Issue 22: webhook mode has every Redis and unix-socket option of sidecar mode, env and the check Secret."""
        extra = ["redis.cluster=true", "redis.user=claimguard", "redis.passwordSecret.name=redis-auth",
                 "redis.passwordSecret.key=pw", "redis.tls.enabled=true", "redis.tls.verify=false",
                 "redis.tls.secret=redis-tls", "redis.tls.clientCertificate=true", "redis.tls.serverName=redis.shop",
                 "sidecar.unixSocket=/var/run/claimguard/mysql.sock", "sidecar.schemaCheckSecret.name=claimguard-check",
                 "sidecar.schemaCheckSecret.passwordKey=pw"]
        env = ['sidecar.env=[{"name":"CLAIMGUARD_LOG_FORMAT","value":"json"}]']
        chart_pod, injected = self.render_pair("1.30.0", extra, env)
        self.assertEqual(self.normalise(chart_pod["initContainers"][0]),
                         self.normalise(injected["spec"]["initContainers"][0]))
        sidecar = chart_pod["initContainers"][0]
        self.assertIn("--no-redis-tls-verify", sidecar["args"])
        self.assertEqual([e["name"] for e in sidecar["env"]],
                         ["CLAIMGUARD_LOG_FORMAT", "CLAIMGUARD_SCHEMA_CHECK_USER", "CLAIMGUARD_SCHEMA_CHECK_PASSWORD"])
        self.assertFalse([a for a in sidecar["args"] if "check" in a], "credentials never in args")
        chart_volumes = {v["name"]: v for v in chart_pod["volumes"] if v["name"].startswith("claimguard-")}
        injected_volumes = {v["name"]: v for v in injected["spec"]["volumes"]}
        self.assertEqual(chart_volumes, injected_volumes)
        # The injector also mounts the socket's directory in the app's containers.
        self.assertIn({"name": "claimguard-socket", "mountPath": "/var/run/claimguard"},
                      injected["spec"]["containers"][0]["volumeMounts"])

FILES = os.path.join(CHART, "files")


class Monitoring(unittest.TestCase):
    """monitoring.*: PodMonitor, ServiceMonitor, PrometheusRule and the dashboard ConfigMap (issue 22)."""

    def test_off_by_default(self):
        for values, kube in ((None, None), ("sidecar-values.yaml", "1.30.0")):
            kinds = {d["kind"] for d in render(values, kube_version=kube)}
            self.assertFalse(kinds & {"PodMonitor", "ServiceMonitor", "PrometheusRule", "NetworkPolicy"}, kinds)
            self.assertEqual([d for d in render(values, kube_version=kube) if d["metadata"]["name"].endswith("dashboard")],
                             [])

    def test_prometheus_rule_is_the_plain_rules_file(self):
        docs = render(sets=["monitoring.prometheusRule.enabled=true", "monitoring.prometheusRule.labels.release=kps"])
        rule = one(docs, "PrometheusRule")
        with open(os.path.join(FILES, "alerts", "claimguard.rules.yaml")) as f:
            plain = yaml.safe_load(f)
        self.assertEqual(rule["apiVersion"], "monitoring.coreos.com/v1")
        self.assertEqual(rule["spec"], {"groups": plain["groups"]})
        self.assertEqual(rule["metadata"]["labels"]["release"], "kps")
        self.assertEqual(rule["metadata"]["namespace"], NAMESPACE)

    def test_pod_monitor_selects_the_label_every_sidecar_pod_gets(self):
        docs = render("sidecar-values.yaml", kube_version="1.30.0",
                      sets=["monitoring.podMonitor.enabled=true", "monitoring.podMonitor.interval=15s"])
        pm = one(docs, "PodMonitor")
        pod = one(docs, "Deployment")["spec"]["template"]
        for k, v in pm["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(pod["metadata"]["labels"][k], v)
        self.assertEqual(pm["spec"]["podMetricsEndpoints"], [{"port": "cg-admin", "path": "/metrics", "interval": "15s"}])
        self.assertEqual(pod["spec"]["initContainers"][0]["ports"][0]["name"], "cg-admin")
        self.assertEqual(pm["spec"]["namespaceSelector"], {"any": True})
        # Webhook mode: the injector labels the pods it injects.
        args = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--sidecar-label", args)

    def test_service_monitor_scrapes_the_injector_over_https_with_its_ca(self):
        docs = render("webhook-cert-manager-values.yaml", kube_version="1.30.2",
                      sets=["monitoring.serviceMonitor.enabled=true"])
        sm = one(docs, "ServiceMonitor")
        service = one(docs, "Service")
        cert = one(docs, "Certificate")
        for k, v in sm["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(service["metadata"]["labels"][k], v)
        (ep,) = sm["spec"]["endpoints"]
        self.assertEqual((ep["port"], ep["scheme"], ep["path"]), (service["spec"]["ports"][0]["name"], "https", "/metrics"))
        self.assertEqual(ep["tlsConfig"]["ca"]["secret"], {"name": cert["spec"]["secretName"], "key": "ca.crt"})
        self.assertIn(ep["tlsConfig"]["serverName"], cert["spec"]["dnsNames"])
        self.assertEqual(by_kind(render("sidecar-values.yaml", kube_version="1.30.0",
                                        sets=["monitoring.serviceMonitor.enabled=true"]), "ServiceMonitor"), [],
                         "no injector in sidecar mode")

    def test_dashboard_config_map_is_the_dashboard_file(self):
        docs = render(sets=["monitoring.dashboard.enabled=true", "monitoring.dashboard.namespace=monitoring"])
        (cm,) = [d for d in by_kind(docs, "ConfigMap") if "claimguard.json" in d["data"]]
        with open(os.path.join(FILES, "dashboards", "claimguard.json")) as f:
            self.assertEqual(json.loads(cm["data"]["claimguard.json"]), json.load(f))
        self.assertEqual(cm["metadata"]["labels"]["grafana_dashboard"], "1")
        self.assertEqual(cm["metadata"]["namespace"], "monitoring")


class PodMetadata(unittest.TestCase):
    """Scrape annotations, checksum/rules, the default rules, env and the schema check Secret (issue 22)."""

    def pod(self, sets=(), set_json=()):
        return one(render("sidecar-values.yaml", kube_version="1.30.0", sets=sets, set_json=set_json),
                   "Deployment")["spec"]["template"]

    def test_scrape_annotations_and_the_pods_own_values_win(self):
        meta = self.pod(set_json=['workload.podAnnotations={"prometheus.io/port":"8080"}'])["metadata"]
        self.assertEqual(meta["annotations"]["prometheus.io/scrape"], "true")
        self.assertEqual(meta["annotations"]["prometheus.io/port"], "8080")
        self.assertEqual(meta["annotations"]["prometheus.io/path"], "/metrics")
        self.assertEqual(self.pod()["metadata"]["annotations"]["prometheus.io/port"], "9090")
        off = self.pod(["sidecar.scrapeAnnotations=false", "workload.podAnnotations=null"])["metadata"]
        self.assertFalse([k for k in off["annotations"] if k.startswith("prometheus.io/")])
        self.assertEqual(off["labels"]["claimguard.io/sidecar"], "true")
        args = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--scrape-annotations", args)
        args = one(render(sets=["sidecar.scrapeAnnotations=false"]), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertNotIn("--scrape-annotations", args)

    def test_checksum_rules_only_when_asked(self):
        self.assertNotIn("checksum/rules", self.pod()["metadata"]["annotations"])
        a = self.pod(["rules.checksumAnnotation=true"])["metadata"]["annotations"]["checksum/rules"]
        b = self.pod(["rules.checksumAnnotation=true", "rules.files.extra\\.yaml=stock_rules: []"])["metadata"]["annotations"]["checksum/rules"]
        self.assertRegex(a, "^[0-9a-f]{16}$")
        self.assertNotEqual(a, b)

    def test_default_rules_observe(self):
        cm = one(render(), "ConfigMap")
        for name, text in cm["data"].items():
            self.assertEqual(yaml.safe_load(text)["default_mode"], "observe", name)

    def test_env_and_schema_check_credentials_from_a_secret(self):
        sidecar = self.pod(["sidecar.schemaCheckSecret.name=claimguard-check"],
                           ['sidecar.env=[{"name":"CLAIMGUARD_LOG_FORMAT","value":"json"},'
                            '{"name":"TZ","valueFrom":{"configMapKeyRef":{"name":"tz","key":"tz"}}}]'])["spec"]["initContainers"][0]
        self.assertEqual(sidecar["env"], [
            {"name": "CLAIMGUARD_LOG_FORMAT", "value": "json"},
            {"name": "TZ", "valueFrom": {"configMapKeyRef": {"name": "tz", "key": "tz"}}},
            {"name": "CLAIMGUARD_SCHEMA_CHECK_USER", "valueFrom": {"secretKeyRef": {"name": "claimguard-check", "key": "username"}}},
            {"name": "CLAIMGUARD_SCHEMA_CHECK_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "claimguard-check", "key": "password"}}}])
        self.assertFalse([a for a in sidecar["args"] if "schema-check" in a])
        self.assertNotIn("env", self.pod()["spec"]["initContainers"][0])
        args = one(render(sets=["sidecar.schemaCheckSecret.name=claimguard-check"],
                          set_json=['sidecar.env=[{"name":"CLAIMGUARD_LOG_FORMAT","value":"json"}]']),
                   "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertEqual(arg_after(args, "--schema-check-secret"), ["claimguard-check"])
        self.assertIn("--sidecar-env=CLAIMGUARD_LOG_FORMAT=json", args)


class InjectorPlacementAndPolicy(unittest.TestCase):
    """The injector's spread over nodes and zones; the NetworkPolicies; webhook Redis flags (issue 22)."""

    def test_replicas_spread_over_nodes_and_zones_unless_overridden(self):
        spec = one(render(), "Deployment")["spec"]["template"]["spec"]
        term = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
        self.assertEqual(term["topologyKey"], "kubernetes.io/hostname")
        labels = one(render(), "Deployment")["spec"]["template"]["metadata"]["labels"]
        for k, v in term["labelSelector"]["matchLabels"].items():
            self.assertEqual(labels[k], v)
        (spread,) = spec["topologySpreadConstraints"]
        self.assertEqual((spread["topologyKey"], spread["whenUnsatisfiable"]), ("topology.kubernetes.io/zone", "ScheduleAnyway"))
        own = one(render(set_json=['webhook.affinity={"nodeAffinity":{}}', 'webhook.topologySpreadConstraints=[{"maxSkew":2,'
                                   '"topologyKey":"k","whenUnsatisfiable":"DoNotSchedule","labelSelector":{}}]']),
                  "Deployment")["spec"]["template"]["spec"]
        self.assertEqual(own["affinity"], {"nodeAffinity": {}})
        self.assertEqual(own["topologySpreadConstraints"][0]["maxSkew"], 2)

    def test_network_policy_for_the_injector(self):
        docs = render(sets=["networkPolicy.enabled=true"],
                      set_json=['networkPolicy.webhookFrom=[{"ipBlock":{"cidr":"10.0.0.0/8"}}]'])
        np = one(docs, "NetworkPolicy")
        labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
        for k, v in np["spec"]["podSelector"]["matchLabels"].items():
            self.assertEqual(labels[k], v)
        self.assertEqual(np["spec"]["ingress"], [{"ports": [{"port": 8443, "protocol": "TCP"}],
                                                  "from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}])
        self.assertEqual(np["spec"]["egress"], [])

    def test_network_policy_for_the_sidecar_mode_workload(self):
        docs = render("sidecar-values.yaml", kube_version="1.30.0", sets=["networkPolicy.enabled=true"],
                      set_json=['networkPolicy.workloadIngress=[{"ports":[{"port":8080}]}]'])
        np = one(docs, "NetworkPolicy")
        pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
        for k, v in np["spec"]["podSelector"]["matchLabels"].items():
            self.assertEqual(pod_labels[k], v)
        self.assertEqual(np["spec"]["ingress"], [{"ports": [{"port": 9090, "protocol": "TCP"}]}, {"ports": [{"port": 8080}]}])

    def test_webhook_mode_redis_and_hold_flags(self):
        args = one(render(sets=SidecarRedis.SETS[:1] + SidecarRedis.SETS[2:]), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--redis-cluster", args)
        self.assertEqual(arg_after(args, "--redis-user"), ["claimguard"])
        self.assertEqual(arg_after(args, "--redis-password-secret"), ["redis-auth"])
        self.assertEqual(arg_after(args, "--redis-password-key"), ["pw"])
        self.assertIn("--redis-tls-verify=true", args)
        self.assertEqual(arg_after(args, "--redis-tls-secret"), ["redis-tls"])
        self.assertIn("--redis-tls-client-certificate", args)
        self.assertIn("--hold-application", args)
        args = one(render(sets=["sidecar.holdApplicationUntilReady=false"]), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertNotIn("--hold-application", args)


class RulesLint(unittest.TestCase):
    @unittest.skipUnless(os.environ.get("CLAIMGUARD"), "CLAIMGUARD not set")
    def test_default_rules_pass_claimguard_lint(self):
        cm = one(render(), "ConfigMap")
        with tempfile.TemporaryDirectory() as d:
            files = []
            for name, text in cm["data"].items():
                files.append(os.path.join(d, name))
                with open(files[-1], "w") as f:
                    f.write(text)
            out = subprocess.run([os.environ["CLAIMGUARD"], "lint", *files], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
            self.assertEqual(out.returncode, 0, out.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
