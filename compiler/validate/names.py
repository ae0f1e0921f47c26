"""Kubernetes name and label syntax, as the API server checks it (apimachinery validation)."""

from __future__ import annotations

import re

_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_ENV_STRICT = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_IANA_SVC = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
MAX_LABEL = 63
ANNOTATIONS_BYTES = 256 * 1024  # apimachinery's TotalAnnotationSizeLimitB: keys and values together


def dns1035_label(name: str) -> str | None:
    """Why `name` is not a DNS-1035 label (Service and job names), or None if it is."""
    if len(name) > MAX_LABEL:
        return f"is {len(name)} characters long; at most {MAX_LABEL} are allowed"
    if not _DNS1035.fullmatch(name):
        return "must consist of lower-case letters, digits and '-', start with a letter and end with a letter or digit"
    return None


def label_suggestion(name: str, *, letter_first: bool = False) -> str | None:
    """The DNS label a newcomer's name most likely meant (ResNet_50: resnet-50), or None when
    nothing near is one: lower case, '_', '.' and spaces as '-', no '-' at either end."""
    fixed = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:MAX_LABEL].rstrip("-")
    if letter_first:
        fixed = fixed.lstrip("-0123456789")
    return fixed if fixed and fixed != name else None


def dns1123_label(name: str) -> str | None:
    """Why `name` is not a DNS-1123 label (pod hostnames), or None if it is."""
    if len(name) > MAX_LABEL:
        return f"is {len(name)} characters long; at most {MAX_LABEL} are allowed"
    if not _DNS1123_LABEL.fullmatch(name):
        return "must consist of lower-case letters, digits and '-', and start and end with a letter or digit"
    return None


def dns1123_subdomain(name: str) -> str | None:
    """Why `name` is not a DNS-1123 subdomain (a cluster domain, a queue name), or None if it is."""
    if len(name) > 253:
        return f"is {len(name)} characters long; at most 253 are allowed"
    if not _DNS1123_SUBDOMAIN.fullmatch(name):
        return "must consist of lower-case letters, digits, '-' and '.', and start and end with a letter or digit"
    return None


def kueue_queue(name: str) -> str | None:
    """Why `name` cannot name a Kueue LocalQueue in a pod's `kueue.x-k8s.io/queue-name` label, or
    None: an object name (a DNS-1123 subdomain) that is also a label value (at most 63 characters)."""
    return dns1123_subdomain(name) or (f"is {len(name)} characters long; a label value holds at most {MAX_LABEL}" if len(name) > MAX_LABEL else None)


def image_reference(ref: str) -> str | None:
    """Why `ref` cannot be a container image reference (whitespace, control characters, or what
    the kubelet cannot parse), or None."""
    if not ref or len(ref) > 4096 or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in ref):
        return "must be an image reference without spaces or control characters, e.g. ghcr.io/flatjob/flatjob:0.1.0"
    why = image_pull_problem(ref)
    return f"{why}, e.g. ghcr.io/flatjob/flatjob:0.1.0" if why else None


# The image reference grammar of distribution/reference (regexp.go, v0.6.0), which the kubelet
# parses every image with (pkg/util/parsers.ParseImageName -> ParseNormalizedNamed); an image
# it refuses leaves the pod in InvalidImageName, never pulled.  Go's \w is ASCII, so is ours.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[(?:[a-fA-F0-9:]+)\])"
_DOMAIN_AND_PORT = rf"{_HOST}(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}"
_REFERENCE = re.compile(rf"(?:(?P<domain>{_DOMAIN_AND_PORT})/)?(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)(?::{_TAG})?(?:@(?P<digest>{_DIGEST}))?", re.ASCII)
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")
# go-digest's algorithms (sha256, sha384, sha512; others are unavailable) and their hex lengths
_DIGESTS = {"sha256": 64, "sha384": 96, "sha512": 128}
_REPOSITORY_MAX = 255  # RepositoryNameTotalLengthMax


def _docker_split(ref: str) -> tuple[str, str]:
    """distribution/reference splitDockerDomain: (domain, the rest), docker.io when none."""
    first, slash, rest = ref.partition("/")
    if not slash:
        return "docker.io", "library/" + ref
    if first == "localhost" or "." in first or ":" in first or first.lower() != first:
        return first, rest
    return "docker.io", ref


def image_pull_problem(ref: str) -> str | None:
    """Why the kubelet cannot parse `ref` as an image reference (ParseNormalizedNamed), or None."""
    if _IDENTIFIER.fullmatch(ref):
        return "is a 64-digit image ID, not a reference the kubelet can pull"
    domain, rest = _docker_split(ref)
    if rest.partition(":")[0].lower() != rest.partition(":")[0]:
        return "has a repository name that is not lower-case"
    match = _REFERENCE.fullmatch(f"{domain}/{rest}")
    if match is None:
        return "is not an image reference ([registry/]repository[:tag][@digest]: lower-case name parts, a tag of letters, digits, '_', '.' and '-')"
    if len(match["path"]) > _REPOSITORY_MAX:
        return f"has a repository name longer than {_REPOSITORY_MAX} characters"
    digest = match["digest"]
    if digest is not None:
        algorithm, _, hexdigits = digest.partition(":")
        if _DIGESTS.get(algorithm) != len(hexdigits) or hexdigits.lower() != hexdigits:
            return f"has a digest that is not sha256, sha384 or sha512 in lower-case hex of their length ({', '.join(f'{k}: {v}' for k, v in _DIGESTS.items())})"
    return None


def qualified_key(key: str) -> str | None:
    """Why `key` is not a valid label/annotation key ([prefix/]name), or None if it is."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return f"prefix {prefix!r} must be a DNS subdomain (lower-case, dots, at most 253 characters)"
    if not name or len(name) > MAX_LABEL or not _LABEL_NAME.fullmatch(name):
        return "name part must be 1-63 characters of letters, digits, '-', '_' or '.', starting and ending alphanumeric"
    return None


def label_value(value: str) -> str | None:
    """Why `value` is not a valid label value, or None if it is."""
    if value == "":
        return None
    if len(value) > MAX_LABEL or not _LABEL_NAME.fullmatch(value):
        return "must be at most 63 characters of letters, digits, '-', '_' or '.', starting and ending alphanumeric"
    return None


def env_var_name(name: str) -> str | None:
    """Why `name` is no environment variable name for Kubernetes 1.32 (printable ASCII but '=',
    RelaxedEnvironmentVariableValidation, beta and on since 1.32), or None."""
    if not name:
        return "must not be empty"
    if "=" in name or not all(" " <= ch <= "~" for ch in name):
        return "must consist of printable ASCII characters other than '='"
    return None


def portable_env_var_name(name: str) -> str | None:
    """Why a 1.32 env name is refused by API servers before 1.32 (or with the gate off), or None."""
    if _ENV_STRICT.fullmatch(name) is None:
        return "is refused by API servers before Kubernetes 1.32: they take letters, digits, '_', '-' and '.', not starting with a digit"
    return None


def iana_svc_name(name: str) -> str | None:
    """Why `name` is no IANA service name (a container port's name), or None."""
    if len(name) > 15:
        return f"is {len(name)} characters long; at most 15 are allowed"
    if not _IANA_SVC.fullmatch(name) or "--" in name or not any(ch.isalpha() for ch in name):
        return "must consist of lower-case letters, digits and '-' (no '--'), with at least one letter, starting and ending alphanumeric"
    return None


def annotations_size(annotations: dict[str, object]) -> int:
    """Bytes the API server counts against ANNOTATIONS_BYTES (ValidateAnnotationsSize: each key
    and string value's length)."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items() if isinstance(k, str) and isinstance(v, str))
