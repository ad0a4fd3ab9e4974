"""Test images made from the local cluster's own: a base image (exported from a real node's containerd) with one
more layer holding a stand-in program, imported into every real node. Used where no local image has the program a
verb runs (TensorBoard: tests/support/programs/tensorboard.py)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path


def _member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _layer(files: dict[str, tuple[bytes, int]]) -> bytes:
    """An uncompressed layer of FILES (path in the image -> (content, mode)), owned by root, dated 0, with their
    directories."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({str(Path(p).parent).lstrip("/") for p in files if str(Path(p).parent) != "/"})
        for folder in dirs:
            parts = folder.split("/")
            for depth in range(1, len(parts) + 1):
                name = "/".join(parts[:depth])
                if name not in tar.getnames():
                    info = tarfile.TarInfo(name)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
        for path, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def layered(base: Path, name: str, files: dict[str, tuple[bytes, int]], out: Path) -> None:
    """An OCI archive (what `ctr images import` reads) of image NAME: BASE's (an OCI archive of one image) with a
    layer of FILES on top."""
    with tarfile.open(base) as src:
        blobs = {m.name: src.extractfile(m).read() for m in src.getmembers() if m.isfile()}  # type: ignore[union-attr]
    index = json.loads(blobs["index.json"])
    manifest = json.loads(blobs["blobs/sha256/" + index["manifests"][0]["digest"].split(":", 1)[1]])
    while manifest.get("manifests"):  # an index inside: take its first image
        manifest = json.loads(blobs["blobs/sha256/" + manifest["manifests"][0]["digest"].split(":", 1)[1]])
    config = json.loads(blobs["blobs/sha256/" + manifest["config"]["digest"].split(":", 1)[1]])
    layer = _layer(files)
    compressed = gzip.compress(layer, compresslevel=1, mtime=0)
    config["rootfs"]["diff_ids"].append("sha256:" + hashlib.sha256(layer).hexdigest())
    config_bytes = json.dumps(config, sort_keys=True).encode()
    new_blobs = {hashlib.sha256(b).hexdigest(): b for b in (compressed, config_bytes)}
    manifest = dict(manifest, config={"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": "sha256:" + hashlib.sha256(config_bytes).hexdigest(),
                                      "size": len(config_bytes)})
    manifest["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
    manifest["layers"] = [*manifest["layers"], {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                                "digest": "sha256:" + hashlib.sha256(compressed).hexdigest(),
                                                "size": len(compressed)}]
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    new_blobs[hashlib.sha256(manifest_bytes).hexdigest()] = manifest_bytes
    new_index = {"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": "sha256:" + hashlib.sha256(manifest_bytes).hexdigest(), "size": len(manifest_bytes),
        "platform": {"architecture": "amd64", "os": "linux"},
        "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]},
    }]}
    with tarfile.open(out, "w") as tar:
        for member, data in blobs.items():
            if member.startswith("blobs/"):
                _member(tar, member, data)
        for digest, data in new_blobs.items():
            _member(tar, f"blobs/sha256/{digest}", data)
        _member(tar, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        _member(tar, "index.json", json.dumps(new_index).encode())


def build_on_real_nodes(data_dir: Path, base_image: str, name: str, files: dict[str, tuple[bytes, int]],
                        work: Path) -> str:
    """Image NAME (BASE_IMAGE plus FILES) in the containerd of every real node of the cluster in DATA_DIR; NAME
    back. Each node's containerd answers on data_dir/real/<node>/containerd.sock (scripts/local-cluster)."""
    socks = sorted((data_dir / "real").glob("*/containerd.sock"))
    assert socks, f"no real node's containerd under {data_dir / 'real'}"
    base = work / "base.tar"
    ctr = ["ctr", "--namespace", "k8s.io"]
    subprocess.run([*ctr, "--address", str(socks[0]), "images", "export", str(base), base_image],
                   check=True, capture_output=True, timeout=300)
    out = work / "image.tar"
    layered(base, name, files, out)
    for sock in socks:
        subprocess.run([*ctr, "--address", str(sock), "images", "import", str(out)], check=True,
                       capture_output=True, timeout=300)
    return name
