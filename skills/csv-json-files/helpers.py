"""CSV and JSON helpers built on the standard library."""
import csv
import json
import os


def _parent(path):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)


def read_csv(path, encoding="utf-8-sig"):
    """Read a CSV file into a list of dicts, sniffing the delimiter."""
    with open(path, newline="", encoding=encoding) as f:
        sample = f.read(4096)
        f.seek(0)
        try:
            dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel
        return list(csv.DictReader(f, dialect=dialect))


def write_csv(rows, path):
    """Write a list of dicts as CSV (columns in first-seen order)."""
    _parent(path)
    fields = []
    for row in rows:
        for key in row:
            if key not in fields:
                fields.append(key)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def read_json(path):
    """Read JSON, or JSON Lines (one object per line) into a list."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def write_json(obj, path, indent=2):
    """Write obj as pretty JSON."""
    _parent(path)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False)
        f.write("\n")
    return path


def flatten(record, prefix=""):
    """Flatten nested dicts into one level: {"a": {"b": 1}} -> {"a.b": 1}."""
    out = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out
