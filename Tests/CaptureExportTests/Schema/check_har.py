"""Checks HAR files with three independent readers: a JSON schema of HAR 1.2 (with format checks), haralyzer, and
mitmproxy's HAR reader (as `mitmdump -nr` loads it). Prints one line per file, `ok N entries` or the problem; exits 1
when a file fails."""
import json
import sys
from pathlib import Path

import jsonschema
from haralyzer import HarEntry, HarParser
from mitmproxy.io import har as mitm_har

schema = json.loads((Path(__file__).parent / "har-1.2.schema.json").read_text())
validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
failed = False
for name in sys.argv[1:]:
    try:
        doc = json.loads(Path(name).read_text(encoding="utf-8"))
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        if errors:
            raise ValueError("schema: " + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]))
        entries = HarParser(doc).har_data["entries"]
        # haralyzer's own view of every entry: its URL, status, time, headers and content type.
        for entry in entries:
            e = HarEntry(entry)
            _ = (e.url, e.status, e.time, e.request.headers, e.response.mimeType)
        # mitmproxy's HAR reader, entry by entry, as `mitmdump -nr` runs it.
        flows = [mitm_har.request_to_flow(entry) for entry in doc["log"]["entries"]]
        print(f"{name}: ok {len(entries)} entries, {len(flows)} flows")
    except Exception as error:  # noqa: BLE001 - every failure is reported with its file
        failed = True
        print(f"{name}: FAILED {type(error).__name__}: {error}")
sys.exit(1 if failed else 0)
