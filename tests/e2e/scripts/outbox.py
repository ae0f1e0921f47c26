"""What an end-to-end rank script saw, written atomically to $E2E_OUT/<name> for the test."""

import json
import os


def record(name: str, data: dict) -> None:
    path = os.path.join(os.environ["E2E_OUT"], name)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)
