"""Job specs the render tests start from, as submit's flags give them (render.spec_from_options): a test names
only what it changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubectl_tao.core.errors import UsageError
from kubectl_tao.manifests import render

# a multi-node TAO train on a shared ReadWriteMany claim, 8 GPUs a node
MULTI_NODE_TRAIN: dict[str, Any] = {
    "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
    "command": "dino train -e /workspace/specs/train.yaml",
    "record_id": "dino-train-1a2b3c",
    "pvc": "shared-rwx",
    "gpus": 8,
}


def multi_node_spec(nodes: int, /, **options: Any) -> Any:
    """MULTI_NODE_TRAIN on NODES nodes, with OPTIONS (spec_from_options' keywords; a `nodes` there wins) over it."""
    return render.spec_from_options(**{**MULTI_NODE_TRAIN, "nodes": nodes, **options})


def refusal(make: Callable[..., Any], **options: Any) -> UsageError:
    """The UsageError MAKE(**OPTIONS) raises: a spec the flags' checks refuse."""
    with pytest.raises(UsageError) as info:
        make(**options)
    return info.value
