"""Whole-job overlay fields: namespace, labels, annotations and image overrides.

They change a job's Node tree without a patch: labels and annotations go on the job (the
in-cluster record) and on every pod template (the pods); `images:` rewrites container images
the way kustomize's images transformer does.  New values keep the overlay file's line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .listkeys import POD_TEMPLATES
from .located import Node, scalar

Update = Callable[[Node], Node]


def update(node: Node, path: tuple[str, ...], fn: Update, anchor: Node) -> Node:
    """Apply fn at path ('*' = every list item); missing mappings are created at `anchor`'s line."""
    if not path:
        return fn(node)
    head, rest = path[0], path[1:]
    if head == "*":
        if not isinstance(node.value, list):
            return node
        return replace(node, value=[update(n, rest, fn, anchor) for n in node.value])
    if not isinstance(node.value, dict):
        return node
    child = node.value.get(head)
    if child is None:
        if rest and rest[0] == "*":
            return node  # no list to walk: nothing to change
        child = Node({}, anchor.source, anchor.mark, anchor.mark)
    return replace(node, value={**node.value, head: update(child, rest, fn, anchor)})


def _merge_map(values: Node) -> Update:
    """Add (or overwrite) string entries of a mapping, e.g. labels."""

    def fn(target: Node) -> Node:
        current = target.value if isinstance(target.value, dict) else {}
        return replace(target, value={**current, **values.value})

    return fn


def template_paths(root: Node) -> list[tuple[str, ...]]:
    """Pod template paths that exist in this job (with '*' for replicaSpecs items)."""
    out = []
    for pattern in POD_TEMPLATES:
        probe: Any = root
        for part in pattern:
            if part == "*":
                break
            probe = probe.get(part) if isinstance(probe, Node) else None
        if probe is not None:
            out.append(pattern)
    return out


def template_count(root: Node) -> int:
    """How many pod templates the job holds (each replica type's, the launcher's, ...)."""
    count = 0
    for pattern in template_paths(root):
        nodes = [root]
        for part in pattern:
            if part == "*":
                nodes = [item for n in nodes if isinstance(n.value, list) for item in n.value]
            else:
                nodes = [child for n in nodes if (child := n.get(part)) is not None]
        count += len(nodes)
    return count


def set_namespace(root: Node, namespace: Node) -> Node:
    """metadata.namespace of the job (and so of everything rendered from it)."""
    return update(root, ("metadata", "namespace"), lambda _: namespace, namespace)


def add_metadata(root: Node, field: str, values: Node) -> Node:
    """Labels or annotations on the job and on each pod template's metadata."""
    root = update(root, ("metadata", field), _merge_map(values), values)
    for pattern in template_paths(root):
        root = update(root, (*pattern, "metadata", field), _merge_map(values), values)
    return root


# --- images ---------------------------------------------------------------------------

_IMAGE = re.compile(r"^(?P<name>[^@]+?)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>[A-Za-z0-9]+:[A-Fa-f0-9]+))?$")
CONTAINER_LISTS = ("containers", "initContainers")
IMAGE_FIELDS: tuple[tuple[str, ...], ...] = (("spec", "launcher", "image"), ("spec", "tensorboardSpec", "image"))


@dataclass(frozen=True)
class ImageRule:
    """One `images:` entry: which image name, and its new name, tag or digest."""

    entry: Node
    name: str
    new_name: str | None = None
    new_tag: str | None = None
    digest: str | None = None

    def rewrite(self, image: str) -> str | None:
        """The new reference for an image this rule matches, else None."""
        m = _IMAGE.match(image)
        if not m or m["name"] != self.name:
            return None
        ref = self.new_name or m["name"]
        if self.digest:
            return f"{ref}@{self.digest}"
        if self.new_tag:
            return f"{ref}:{self.new_tag}"
        return ref + (f":{m['tag']}" if m["tag"] else "") + (f"@{m['digest']}" if m["digest"] else "")


def _rewrite(rules: list[ImageRule]) -> Update:
    def fn(image: Node) -> Node:
        if not isinstance(image.value, str):
            return image
        for rule in rules:
            new = rule.rewrite(image.value)
            if new is not None:
                return replace(scalar(new, rule.entry), key_mark=image.key_mark)
        return image

    return fn


def _containers(node: Node, fn: Update) -> Node:
    """Apply fn to the image of every container and init container anywhere in the tree."""
    if isinstance(node.value, list):
        return replace(node, value=[_containers(n, fn) for n in node.value])
    if not isinstance(node.value, dict):
        return node
    out = {}
    for key, child in node.value.items():
        if key in CONTAINER_LISTS and isinstance(child.value, list):
            child = replace(child, value=[_image(c, fn) for c in child.value])
        else:
            child = _containers(child, fn)
        out[key] = child
    return replace(node, value=out)


def _image(container: Node, fn: Update) -> Node:
    image = container.get("image")
    if image is None:
        return container
    return replace(container, value={**container.value, "image": fn(image)})


def set_images(root: Node, rules: list[ImageRule]) -> Node:
    """Rewrite every container image (and the launcher/TensorBoard images) the rules match."""
    fn = _rewrite(rules)
    root = _containers(root, fn)
    for path in IMAGE_FIELDS:
        parent = root
        for part in path[:-1]:
            parent = parent.get(part) if parent is not None else None
        if parent is not None and parent.get(path[-1]) is not None:
            root = update(root, path, fn, root)
    return root
