#!/usr/bin/env python3
"""Offline structural check of the Kubernetes manifests in contrib/kubernetes/ (no cluster, no network).

`kubectl apply/create --dry-run=client` need the API server's discovery even with --validate=false, so
they cannot check anything offline. Instead the YAML is parsed by `kubectl label --local -o json` (kubectl's
own YAML decoder, which needs no server) when --kubectl is given, else by PyYAML, and the objects are
checked here against the fields the manifests use (types, enums, quantities, unknown keys that would be
typos), against each other (selectors, ServiceAccounts, RoleBindings, PVCs, named ports, volume mounts),
and against the programs they run (every flag in args must be in `firstfault <sub> --help` or the
collector's `<sub> --help`).

usage: k8s_manifest_check.py --firstfault BIN --collector SCRIPT [--kubectl KUBECTL] FILE...
exit 0: all good; 1: a problem (each printed); 77: no parser available (neither kubectl nor PyYAML).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

problems = []

KNOWN = {
    ("v1", "Namespace"): False, ("v1", "ServiceAccount"): True, ("v1", "PersistentVolumeClaim"): True,
    ("v1", "ConfigMap"): True, ("apps/v1", "DaemonSet"): True, ("batch/v1", "Job"): True,
    ("batch/v1", "CronJob"): True, ("rbac.authorization.k8s.io/v1", "Role"): True,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): True, ("rbac.authorization.k8s.io/v1", "ClusterRole"): False,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): False,
}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
QUANTITY = re.compile(r"^\d+(\.\d+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
POD_SPEC = {"containers", "initContainers", "volumes", "restartPolicy", "serviceAccountName", "securityContext",
            "automountServiceAccountToken", "nodeSelector", "tolerations", "affinity", "enableServiceLinks",
            "terminationGracePeriodSeconds", "priorityClassName", "dnsPolicy", "activeDeadlineSeconds"}
CONTAINER = {"name", "image", "imagePullPolicy", "command", "args", "env", "ports", "resources", "securityContext",
             "volumeMounts", "readinessProbe", "livenessProbe", "startupProbe", "workingDir"}
CONTAINER_SC = {"allowPrivilegeEscalation", "readOnlyRootFilesystem", "privileged", "capabilities", "runAsUser",
                "runAsGroup", "runAsNonRoot", "seccompProfile"}
POD_SC = {"runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup", "seccompProfile", "supplementalGroups"}
PROBE = {"httpGet", "tcpSocket", "exec", "initialDelaySeconds", "periodSeconds", "timeoutSeconds",
         "failureThreshold", "successThreshold"}
VOLUME_SOURCES = {"hostPath", "emptyDir", "persistentVolumeClaim", "configMap", "secret"}
RBAC_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
# What contrib/kubernetes/collect-job-logs.py does with kubectl: (apiGroup, resource) -> verbs it needs.
COLLECTOR_NEEDS = {("", "pods"): {"get", "list"}, ("", "pods/log"): {"get"}, ("", "events"): {"list"},
                   ("kubeflow.org", "pytorchjobs"): {"get", "list", "patch"},
                   ("jobset.x-k8s.io", "jobsets"): {"get", "list", "patch"}}
# What report-failed --cordon / --taint need (kubectl cordon and kubectl taint get the node, then patch it):
# the cluster-wide binding (rbac-nodes.yaml) must grant these, and nothing on any other resource.
NODE_ACTIONS_NEEDS = {("", "nodes"): {"get", "patch"}}


def bad(where, msg):
    problems.append("%s: %s" % (where, msg))


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_keys(where, obj, allowed):
    if not isinstance(obj, dict):
        bad(where, "expected a mapping, got %r" % (obj,))
        return False
    for k in obj:
        if k not in allowed:
            bad(where, "unknown or unexpected field %r" % k)
    return True


def check_strings(where, v):
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        bad(where, "expected a list of strings (quote numbers), got %r" % (v,))


def check_resources(where, r):
    if not check_keys(where, r, {"requests", "limits"}):
        return
    for part in ("requests", "limits"):
        for k, v in (r.get(part) or {}).items():
            if k not in ("cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"):
                bad(where, "%s: unexpected resource %r" % (part, k))
            if not isinstance(v, str) or not QUANTITY.match(v):
                bad(where, "%s.%s: %r is not a quantity string" % (part, k, v))


def check_pod_spec(where, spec, ns, index):
    if not check_keys(where, spec, POD_SPEC):
        return
    if spec.get("restartPolicy") not in (None, "Always", "OnFailure", "Never"):
        bad(where, "restartPolicy %r" % spec.get("restartPolicy"))
    sa = spec.get("serviceAccountName")
    if sa and sa != "default" and ("ServiceAccount", ns, sa) not in index:
        bad(where, "serviceAccountName %r: no such ServiceAccount in namespace %s in the manifests" % (sa, ns))
    psc = spec.get("securityContext") or {}
    check_keys(where + ".securityContext", psc, POD_SC)
    if (psc.get("seccompProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost", "Unconfined"):
        bad(where, "seccompProfile.type")
    if psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 0:
        bad(where, "runAsNonRoot with runAsUser 0 never starts")
    for t in spec.get("tolerations") or []:
        check_keys(where + ".tolerations", t, {"key", "operator", "value", "effect", "tolerationSeconds"})
        if t.get("operator") not in (None, "Exists", "Equal") or t.get("effect") not in (None, "NoSchedule", "PreferNoSchedule", "NoExecute"):
            bad(where, "toleration %r" % t)
    for k, v in (spec.get("nodeSelector") or {}).items():
        if not isinstance(v, str):
            bad(where, "nodeSelector %s: value must be a string" % k)
    volumes = {}
    for v in spec.get("volumes") or []:
        check_keys(where + ".volumes", v, {"name"} | VOLUME_SOURCES)
        src = [k for k in v if k in VOLUME_SOURCES]
        if len(src) != 1 or not DNS_LABEL.match(str(v.get("name", ""))):
            bad(where, "volume %r: needs a name and exactly one source" % v)
            continue
        volumes[v["name"]] = (src[0], v[src[0]] or {})
        if src[0] == "persistentVolumeClaim":
            claim = v[src[0]].get("claimName")
            if ("PersistentVolumeClaim", ns, claim) not in index:
                bad(where, "claimName %r: no such PersistentVolumeClaim in %s in the manifests" % (claim, ns))
        if src[0] == "hostPath" and (not str(v["hostPath"].get("path", "")).startswith("/") or
                                     v["hostPath"].get("type") not in (None, "", "Directory", "DirectoryOrCreate", "File")):
            bad(where, "hostPath %r" % v["hostPath"])
        if src[0] == "emptyDir" and "sizeLimit" in v["emptyDir"] and not QUANTITY.match(str(v["emptyDir"]["sizeLimit"])):
            bad(where, "emptyDir.sizeLimit %r" % v["emptyDir"]["sizeLimit"])
    mounted = set()
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        cw = "%s.containers[%s]" % (where, c.get("name"))
        if not check_keys(cw, c, CONTAINER):
            continue
        if not DNS_LABEL.match(str(c.get("name", ""))) or not isinstance(c.get("image"), str) or not c["image"]:
            bad(cw, "needs a DNS-label name and an image")
        if c.get("imagePullPolicy") not in (None, "Always", "IfNotPresent", "Never"):
            bad(cw, "imagePullPolicy")
        for k in ("command", "args"):
            if k in c:
                check_strings(cw + "." + k, c[k])
        for e in c.get("env") or []:
            check_keys(cw + ".env", e, {"name", "value", "valueFrom"})
            if not isinstance(e.get("name"), str) or ("value" in e and not isinstance(e["value"], str)):
                bad(cw, "env %r: name and value must be strings" % e)
        ports = {}
        for p in c.get("ports") or []:
            check_keys(cw + ".ports", p, {"name", "containerPort", "protocol", "hostPort"})
            if not is_int(p.get("containerPort")) or not 1 <= p["containerPort"] <= 65535:
                bad(cw, "containerPort %r" % p.get("containerPort"))
            if p.get("protocol") not in (None, "TCP", "UDP", "SCTP"):
                bad(cw, "protocol %r" % p.get("protocol"))
            if "name" in p:
                if not re.match(r"^[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$", str(p["name"])):
                    bad(cw, "port name %r (at most 15 lowercase characters)" % p["name"])
                ports[p["name"]] = p.get("containerPort")
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            pr = c.get(probe)
            if pr is None:
                continue
            check_keys(cw + "." + probe, pr, PROBE)
            for k in PROBE - {"httpGet", "tcpSocket", "exec"}:
                if k in pr and (not is_int(pr[k]) or pr[k] < 0):
                    bad(cw, "%s.%s must be a non-negative integer" % (probe, k))
            hg = pr.get("httpGet")
            if hg is not None:
                port = hg.get("port")
                if isinstance(port, str) and port not in ports:
                    bad(cw, "%s: port %r is not a named containerPort" % (probe, port))
                if not str(hg.get("path", "/")).startswith("/"):
                    bad(cw, "%s: path must start with /" % probe)
        if "resources" in c:
            check_resources(cw + ".resources", c["resources"])
        sc = c.get("securityContext") or {}
        check_keys(cw + ".securityContext", sc, CONTAINER_SC)
        caps = sc.get("capabilities") or {}
        check_keys(cw + ".securityContext.capabilities", caps, {"add", "drop"})
        for k in ("add", "drop"):
            if k in caps:
                check_strings(cw + ".capabilities." + k, caps[k])
        for m in c.get("volumeMounts") or []:
            check_keys(cw + ".volumeMounts", m, {"name", "mountPath", "readOnly", "subPath"})
            if m.get("name") not in volumes:
                bad(cw, "volumeMount %r: no such volume" % m.get("name"))
            if not str(m.get("mountPath", "")).startswith("/"):
                bad(cw, "mountPath %r must be absolute" % m.get("mountPath"))
            if "readOnly" in m and not isinstance(m["readOnly"], bool):
                bad(cw, "readOnly must be a boolean")
            mounted.add(m.get("name"))
    for name in volumes:
        if name not in mounted:
            bad(where, "volume %r is never mounted" % name)


def check_labels(where, meta):
    for part in ("labels", "annotations"):
        for k, v in (meta.get(part) or {}).items():
            if not isinstance(v, str):
                bad(where, "%s %s: value %r must be a string (quote it)" % (part, k, v))
            elif part == "labels" and not LABEL_VALUE.match(v):
                bad(where, "label %s: value %r is not a valid label value" % (k, v))


def check_template(where, tmpl, ns, index):
    if not check_keys(where, tmpl, {"metadata", "spec"}):
        return
    check_labels(where + ".metadata", tmpl.get("metadata") or {})
    check_pod_spec(where + ".spec", tmpl.get("spec") or {}, ns, index)


def flags_of(args):
    return sorted({a.split("=", 1)[0] for a in args if a.startswith("--")})


def help_text(cmd):
    try:
        r = subprocess.run(cmd + ["--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        return r.stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired) as e:
        return "cannot run %s: %s" % (cmd, e)


def check_commands(where, spec, tools):
    """Every flag a container passes must be one the program it runs accepts."""
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        cmd, args = c.get("command") or [], c.get("args") or []
        if not cmd or not args or not isinstance(cmd[0], str):
            continue
        prog = os.path.basename(cmd[0])
        if prog not in tools:
            bad(where, "container %s runs %r, which this check does not know" % (c.get("name"), prog))
            continue
        text = help_text(tools[prog] + [args[0]])
        if "Usage" not in text and "usage" not in text:
            bad(where, "%s %s is not a subcommand (%s)" % (prog, args[0], text.strip()[:200]))
            continue
        for f in flags_of(args):
            if not re.search(r"(^|[\s,\[])%s([\s,=\]]|$)" % re.escape(f), text, re.M):
                bad(where, "%s %s does not accept %s" % (prog, args[0], f))


def check(objs, tools):
    index = {}
    for where, o in objs:
        meta = o.get("metadata") or {}
        index[(o.get("kind"), meta.get("namespace"), meta.get("name"))] = o
    rbac = {}  # (namespace, role name) -> rules
    for where, o in objs:
        if o.get("kind") in ("Role", "ClusterRole"):
            rbac[(o["metadata"].get("namespace"), o["metadata"]["name"])] = o.get("rules") or []
    for where, o in objs:
        key = (o.get("apiVersion"), o.get("kind"))
        meta = o.get("metadata") or {}
        where = "%s: %s/%s" % (where, o.get("kind"), meta.get("name"))
        if key not in KNOWN:
            bad(where, "unknown apiVersion/kind %s %s" % key)
            continue
        if not DNS_SUBDOMAIN.match(str(meta.get("name", ""))):
            bad(where, "metadata.name %r" % meta.get("name"))
        namespaced = KNOWN[key]
        ns = meta.get("namespace")
        if namespaced and not ns:
            bad(where, "namespaced object without metadata.namespace (it would land in the current namespace)")
        if not namespaced and ns:
            bad(where, "cluster-scoped object with a namespace")
        check_labels(where, meta)
        kind = o["kind"]
        spec = o.get("spec") or {}
        if kind == "Namespace":
            for k, v in (meta.get("labels") or {}).items():
                if k.startswith("pod-security.kubernetes.io/") and not k.endswith("-version") and v not in ("privileged", "baseline", "restricted"):
                    bad(where, "%s: %r" % (k, v))
        elif kind == "PersistentVolumeClaim":
            if not set(spec.get("accessModes") or []) <= {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"} or not spec.get("accessModes"):
                bad(where, "accessModes %r" % spec.get("accessModes"))
            if not QUANTITY.match(str(((spec.get("resources") or {}).get("requests") or {}).get("storage", ""))):
                bad(where, "resources.requests.storage")
        elif kind == "DaemonSet":
            check_keys(where + ".spec", spec, {"selector", "template", "updateStrategy", "minReadySeconds", "revisionHistoryLimit"})
            tmpl = spec.get("template") or {}
            check_template(where + ".spec.template", tmpl, ns, index)
            sel = (spec.get("selector") or {}).get("matchLabels") or {}
            labels = (tmpl.get("metadata") or {}).get("labels") or {}
            if not sel or any(labels.get(k) != v for k, v in sel.items()):
                bad(where, "spec.selector.matchLabels %r does not select the template's labels %r" % (sel, labels))
            check_commands(where, tmpl.get("spec") or {}, tools)
            check_watch_daemonset(where, tmpl)
        elif kind in ("Job", "CronJob"):
            jspec = spec
            if kind == "CronJob":
                check_keys(where + ".spec", spec, {"schedule", "concurrencyPolicy", "startingDeadlineSeconds", "suspend",
                                                   "successfulJobsHistoryLimit", "failedJobsHistoryLimit", "jobTemplate", "timeZone"})
                if not isinstance(spec.get("schedule"), str) or len(spec["schedule"].split()) != 5:
                    bad(where, "schedule %r: five cron fields" % spec.get("schedule"))
                if spec.get("concurrencyPolicy") not in (None, "Allow", "Forbid", "Replace"):
                    bad(where, "concurrencyPolicy")
                jspec = (spec.get("jobTemplate") or {}).get("spec") or {}
            check_keys(where + " job spec", jspec, {"template", "backoffLimit", "activeDeadlineSeconds",
                                                    "ttlSecondsAfterFinished", "parallelism", "completions"})
            for k in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
                if k in jspec and not is_int(jspec[k]):
                    bad(where, "%s must be an integer" % k)
            tmpl = jspec.get("template") or {}
            check_template(where + " pod template", tmpl, ns, index)
            if (tmpl.get("spec") or {}).get("restartPolicy") not in ("Never", "OnFailure"):
                bad(where, "a Job's pods need restartPolicy Never or OnFailure")
            check_commands(where, tmpl.get("spec") or {}, tools)
        elif kind in ("Role", "ClusterRole"):
            for r in o.get("rules") or []:
                check_keys(where + ".rules", r, {"apiGroups", "resources", "verbs", "resourceNames"})
                for k in ("apiGroups", "resources", "verbs"):
                    check_strings(where + ".rules." + k, r.get(k))
                if "*" in (r.get("verbs") or []) + (r.get("resources") or []) + (r.get("apiGroups") or []):
                    bad(where, "wildcard in a rule: %r" % r)
                if not set(r.get("verbs") or []) <= RBAC_VERBS:
                    bad(where, "verbs %r" % r.get("verbs"))
                if "secrets" in (r.get("resources") or []):
                    bad(where, "the collector never needs secrets")
        elif kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = o.get("roleRef") or {}
            if ref.get("apiGroup") != "rbac.authorization.k8s.io" or ref.get("kind") not in ("Role", "ClusterRole"):
                bad(where, "roleRef %r" % ref)
            rns = ns if ref.get("kind") == "Role" else None
            if (rns, ref.get("name")) not in rbac:
                bad(where, "roleRef %s %r is not in the manifests" % (ref.get("kind"), ref.get("name")))
            for s in o.get("subjects") or []:
                if s.get("kind") == "ServiceAccount" and ("ServiceAccount", s.get("namespace"), s.get("name")) not in index:
                    bad(where, "subject ServiceAccount %s/%s is not in the manifests" % (s.get("namespace"), s.get("name")))
                # what the bound service account's pods run: the role must allow the collector's calls
            rules = rbac.get((rns, ref.get("name")), [])
            needs = COLLECTOR_NEEDS if kind == "RoleBinding" else NODE_ACTIONS_NEEDS
            if kind == "ClusterRoleBinding":
                for r in rules:
                    extra = [(g, res) for g in r.get("apiGroups") or [] for res in r.get("resources") or []
                             if (g, res) not in NODE_ACTIONS_NEEDS]
                    if extra or not set(r.get("verbs") or []) <= {"get", "patch"}:
                        bad(where, "a cluster-wide role may only get and patch nodes, not %r" % r)
            for (group, res), verbs in needs.items():
                have = set()
                for r in rules:
                    if group in (r.get("apiGroups") or []) and res in (r.get("resources") or []):
                        have |= set(r.get("verbs") or [])
                if not verbs <= have:
                    bad(where, "the role lacks %s on %s%s (the collector needs it)" % (
                        sorted(verbs - have), res, "." + group if group else ""))


def check_watch_daemonset(where, tmpl):
    ann = (tmpl.get("metadata") or {}).get("annotations") or {}
    spec = tmpl.get("spec") or {}
    if ann.get("prometheus.io/scrape") != "true":
        bad(where, 'pod template lacks prometheus.io/scrape: "true"')
    if not str(ann.get("prometheus.io/path", "")).startswith("/"):
        bad(where, "pod template lacks prometheus.io/path")
    port = ann.get("prometheus.io/port")
    for c in spec.get("containers") or []:
        ports = {str(p.get("containerPort")) for p in c.get("ports") or []}
        if port not in ports:
            bad(where, "prometheus.io/port %r is not a containerPort of %s" % (port, c.get("name")))
        metrics = [a.split("=", 1)[1] for a in c.get("args") or [] if a.startswith("--metrics=")]
        if not metrics or not metrics[0].endswith(":" + str(port)) or metrics[0].startswith("127."):
            bad(where, "watch --metrics %r must listen beyond loopback on the annotated port %s" % (metrics, port))
        sc = c.get("securityContext") or {}
        if sc.get("readOnlyRootFilesystem") is not True or sc.get("allowPrivilegeEscalation") is not False:
            bad(where, "%s: readOnlyRootFilesystem true and allowPrivilegeEscalation false expected" % c.get("name"))
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            bad(where, "%s: capabilities.drop [ALL] expected" % c.get("name"))
        lim = (c.get("resources") or {}).get("limits") or {}
        if "cpu" not in lim or "memory" not in lim:
            bad(where, "%s: cpu and memory limits expected" % c.get("name"))
        host_mounts = {m["name"]: m for m in c.get("volumeMounts") or []}
        for v in spec.get("volumes") or []:
            if "hostPath" in v:
                m = host_mounts.get(v["name"])
                if not m or m.get("readOnly") is not True:
                    bad(where, "hostPath %s must be mounted readOnly" % v["hostPath"].get("path"))
                if v["hostPath"].get("path") == "/var/log/pods" and m and m.get("mountPath") not in (c.get("args") or []):
                    bad(where, "watch is not given the mounted /var/log/pods path")


def load_with_kubectl(kubectl, path):
    """kubectl's own YAML decoding, offline: `label --local` never contacts a server."""
    env = dict(os.environ)
    with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as kc:
        kc.write("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    env["KUBECONFIG"] = kc.name
    try:
        r = subprocess.run([kubectl, "label", "--local", "-f", path, "firstfault-manifest-check=1", "-o", "json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)
    finally:
        os.unlink(kc.name)
    if r.returncode != 0:
        raise ValueError(r.stderr.decode("utf-8", "replace").strip())
    text, objs, dec, i = r.stdout.decode("utf-8"), [], json.JSONDecoder(), 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        o, i = dec.raw_decode(text, i)
        items = o.get("items", [o]) if o.get("kind") == "List" else [o]
        for it in items:
            labels = (it.get("metadata") or {}).get("labels") or {}
            labels.pop("firstfault-manifest-check", None)
            if not labels and "labels" in (it.get("metadata") or {}):
                del it["metadata"]["labels"]
            objs.append(it)
    return objs


def load_with_pyyaml(path):
    import yaml  # python3-yaml
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--firstfault", required=True)
    ap.add_argument("--collector", required=True)
    ap.add_argument("--kubectl")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    loader, how = None, None
    if a.kubectl:
        loader, how = (lambda p: load_with_kubectl(a.kubectl, p)), "kubectl label --local -o json"
    else:
        try:
            import yaml  # noqa: F401
            loader, how = load_with_pyyaml, "PyYAML"
        except ImportError:
            print("skip: neither kubectl nor PyYAML (python3-yaml) is available to parse the manifests")
            return 77
    tools = {"firstfault": [a.firstfault], "collect-job-logs.sh": [sys.executable, a.collector]}
    objs = []
    for path in a.files:
        try:
            docs = loader(path)
        except Exception as e:  # a YAML error: the file is the problem
            bad(os.path.basename(path), "does not parse: %s" % e)
            continue
        if not docs:
            bad(os.path.basename(path), "no objects")
        for d in docs:
            if not isinstance(d, dict):
                bad(os.path.basename(path), "a document that is not a mapping")
                continue
            objs.append((os.path.basename(path), d))
    check(objs, tools)
    for p in problems:
        print("FAIL " + p)
    print("%s: %d manifest file(s), %d object(s) parsed with %s, %d problem(s)" % (
        "ok" if not problems else "FAIL", len(a.files), len(objs), how, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
