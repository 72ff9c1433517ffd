#!/usr/bin/env bash
# Entry point of the Kubernetes collector: see collect-job-logs.py (python3, standard library only) for
# the subcommands (collect, split, report-failed). It is Python because it parses `kubectl get -o json`
# without needing jq. Usage: collect-job-logs.sh collect -n NAMESPACE --pytorchjob NAME [-o OUTDIR]
set -euo pipefail
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
exec "${PYTHON:-python3}" "$here/collect-job-logs.py" "$@"
