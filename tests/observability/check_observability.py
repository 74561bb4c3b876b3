#!/usr/bin/env python3
"""The shipped observability assets (issue 22): the alerts, their promtool tests, the Grafana dashboard.

Checks that promtool accepts the rules and passes a test per alert, that the dashboard is valid
JSON Grafana can import, and that every metric name an alert or a panel uses is one claimguard
exports: the sample names of a running `claimguard serve` (rules loaded, Redis configured) and
of the injector's /metrics (names registered in proxy/inject/webhook_server.cpp).

Run:  python3 check_observability.py [unittest names]
Environment: CLAIMGUARD (the binary), PROMTOOL (default: promtool on PATH; Debian's prometheus
package, scripts/setup.sh installs it).
"""
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FILES = os.path.join(ROOT, "helm", "claimguard", "files")
RULES = os.path.join(FILES, "alerts", "claimguard.rules.yaml")
RULES_TEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "claimguard.rules.test.yaml")
DASHBOARD = os.path.join(FILES, "dashboards", "claimguard.json")

# Words of PromQL (and Grafana's variables) that are not metric names.
PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "by", "without", "rate", "increase", "irate", "histogram_quantile",
    "and", "or", "unless", "on", "ignoring", "group_left", "group_right", "bool", "label_values", "changes",
    "resets", "delta", "abs", "clamp_min", "time", "topk", "bottomk", "offset",
}


def promtool():
    tool = shutil.which(os.environ.get("PROMTOOL") or "promtool")
    if not tool:
        raise AssertionError("promtool missing: run scripts/setup.sh (Debian package prometheus)")
    return tool


def metric_names(expr):
    """The metric names of a PromQL expression: label matchers, grouping lists, ranges, strings and
    numbers removed; what remains that is not a function or keyword is a metric name."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\$\w+", " ", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word = m.group(0)
        if word in PROMQL_WORDS or re.fullmatch(r"\d+(\.\d+)?[smhdwy]?", word):
            continue
        names.add(word)
    return names


def alert_rules():
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    return [r for g in doc["groups"] for r in g["rules"]]


def dashboard_exprs():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for v in dash["templating"]["list"]:
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query", "")
        if isinstance(q, str) and q.startswith("label_values("):
            exprs.append(q[len("label_values("):q.rindex(",")])
    return exprs


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape_serve():
    """Sample names on the /metrics of a claimguard serve with the chart's rules and a Redis."""
    binary = os.environ.get("CLAIMGUARD")
    if not binary:
        raise AssertionError("CLAIMGUARD (the binary) not set")
    with open(os.path.join(ROOT, "helm", "claimguard", "values.yaml")) as f:
        chart_values = yaml.safe_load(f)
    with tempfile.TemporaryDirectory() as d:
        for name, text in chart_values["rules"]["files"].items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        with open(os.path.join(d, "extra.yaml"), "w") as f:
            # Every kind of per-rule child: an enforce stock rule with admission and a read cache.
            f.write("stock_rules:\n  - name: obs_check_stock\n    table: obs_stock\n    key_columns: [id]\n"
                    "    counter_column: remain\n    mode: enforce\n    admission: {max_in_flight: 4, queue_timeout: 2s}\n"
                    "    read_cache: 100ms\n")
        admin = free_port()
        # A Redis whose accept queue is full (backlog 0, filled by connections of our own, never accepted): the
        # kernel drops the guard's SYNs, so its first connect has no outcome while this scrapes, and the
        # claimguard_redis_* series must be there from start-up (they once appeared only after the first
        # connect's outcome: a loaded CI machine scraped before it).
        silent_redis = socket.socket()
        silent_redis.bind(("127.0.0.1", 0))
        silent_redis.listen(0)
        fillers = []
        for _ in range(3):
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex(silent_redis.getsockname())
            fillers.append(f)
        time.sleep(0.2)
        proc = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{free_port()}", "--backend", "127.0.0.1:9",
                                 "--admin", f"127.0.0.1:{admin}", "--control", "off", "--rules-dir", d,
                                 "--redis", f"127.0.0.1:{silent_redis.getsockname()[1]}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.time() + 15
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=2) as r:
                        text = r.read().decode()
                    if "claimguard_rules_info" in text:
                        break
                except OSError:
                    pass
                if proc.poll() is not None or time.time() > deadline:
                    proc.kill()
                    raise AssertionError(f"claimguard serve gave no /metrics: {proc.communicate()[1][-2000:]}")
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            proc.stderr.close()
            for f in fillers + [silent_redis]:
                f.close()
    return text


def sample_names(text):
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def injector_names():
    """Injector families as registered (the injector needs TLS to be scraped; webhook_server_test scrapes it)."""
    with open(os.path.join(ROOT, "proxy", "inject", "webhook_server.cpp")) as f:
        src = f.read()
    names = set(re.findall(r'"(claimguard_inject_[a-z_]+)"', src))
    assert len(names) >= 5, names
    return names


class Promtool(unittest.TestCase):
    def test_check_rules(self):
        out = subprocess.run([promtool(), "check", "rules", RULES], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn(f"SUCCESS: {len(alert_rules())} rules found", out.stdout)

    def test_test_rules(self):
        out = subprocess.run([promtool(), "test", "rules", RULES_TEST], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, cwd=os.path.dirname(RULES_TEST))
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("SUCCESS", out.stdout)

    def test_a_test_per_alert_that_expects_it_to_fire_and_not_to(self):
        with open(RULES_TEST) as f:
            doc = yaml.safe_load(f)
        self.assertEqual([os.path.normpath(os.path.join(os.path.dirname(RULES_TEST), p)) for p in doc["rule_files"]],
                         [RULES])
        fired, quiet = set(), set()
        for t in doc["tests"]:
            for a in t["alert_rule_test"]:
                (fired if a["exp_alerts"] else quiet).add(a["alertname"])
        names = {r["alert"] for r in alert_rules()}
        self.assertEqual(names - fired, set(), "alerts without a test where they fire")
        self.assertEqual(names - quiet, set(), "alerts without a test where they stay quiet")
        self.assertEqual(len(names), len(alert_rules()), "alert names repeat")

    def test_every_alert_has_severity_and_summary(self):
        for r in alert_rules():
            self.assertIn(r["labels"]["severity"], ("critical", "warning", "info"), r["alert"])
            self.assertTrue(r["annotations"]["summary"], r["alert"])


class Dashboard(unittest.TestCase):
    def test_valid_grafana_json(self):
        with open(DASHBOARD) as f:
            dash = json.load(f)
        self.assertEqual(dash["uid"], "claimguard")
        ids = [p["id"] for p in dash["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids repeat")
        self.assertGreaterEqual(len(ids), 10)
        for p in dash["panels"]:
            self.assertTrue(p.get("targets"), p["title"])
            self.assertEqual(p["datasource"]["uid"], "${datasource}", p["title"])
            for t in p["targets"]:
                self.assertTrue(metric_names(t["expr"]), f"{p['title']}: {t['expr']}")
        self.assertEqual([v["name"] for v in dash["templating"]["list"]], ["datasource", "namespace", "pod"])


class MetricNames(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scrape = scrape_serve()
        cls.exported = sample_names(cls.scrape) | injector_names()

    def test_the_parser_finds_names_and_flags_typos(self):
        self.assertEqual(metric_names('sum by (rule) (rate(claimguard_x_total{rule=~"a|b"}[5m])) / on (pod) y > 0.8'),
                         {"claimguard_x_total", "y"})
        self.assertEqual(metric_names("histogram_quantile(0.99, sum by (le) (rate(a_bucket[$__rate_interval])))"),
                         {"a_bucket"})
        self.assertIn("claimgaurd_client_connections", metric_names("claimgaurd_client_connections") - self.exported)

    def test_serve_exports_what_issue_22_added(self):
        for name in ["claimguard_client_connections", "claimguard_client_connections_accepted_total",
                     "claimguard_backend_connections", "claimguard_max_connections", "claimguard_rules_info",
                     "claimguard_claim_duration_seconds_bucket", "process_cpu_seconds_total",
                     "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"]:
            self.assertIn(name, self.exported, name)
        self.assertNotIn("claimguard_client_connections_total", self.exported)

    def test_every_rule_has_its_series_at_zero_from_load(self):
        for rule in ("obs_check_stock",):
            for family in ("claimguard_rewrites_total", "claimguard_exhausted_total", "claimguard_claims_total",
                           "claimguard_admission_timeouts_total", "claimguard_claim_duration_seconds_count"):
                self.assertRegex(self.scrape, rf'\n{family}{{rule="{rule}"}} 0\n', family)
            self.assertIn(f'claimguard_read_cache_total{{rule="{rule}",result="hit"}} 0', self.scrape)

    def test_alert_expressions_use_exported_names(self):
        for r in alert_rules():
            with self.subTest(r["alert"]):
                names = metric_names(r["expr"])
                self.assertTrue(names, r["expr"])
                self.assertEqual(names - self.exported, set(), r["expr"])

    def test_dashboard_expressions_use_exported_names(self):
        for expr in dashboard_exprs():
            with self.subTest(expr):
                self.assertEqual(metric_names(expr) - self.exported, set(), expr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
