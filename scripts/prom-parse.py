"""Parses a metrics exposition with the `prometheus_client` package's own parsers (the text
format 0.0.4, or OpenMetrics with `om`) and prints its samples as JSON, one object per family:
{"name", "type", "samples": [[name, labels, value], ...]}. A parse error exits non-zero.
Used by firstbyte/tests/metrics.rs; scripts/test installs prometheus-client in
target/tools/prometheus."""
import json
import sys

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families

text = sys.stdin.read()
parse = openmetrics_families if sys.argv[1:] == ["om"] else text_families
out = []
for f in parse(text):
    out.append(
        {
            "name": f.name,
            "type": f.type,
            "samples": [[s.name, s.labels, s.value] for s in f.samples],
        }
    )
json.dump(out, sys.stdout)
