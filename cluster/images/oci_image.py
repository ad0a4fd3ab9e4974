"""Write an OCI image layout archive (one layer) from a root filesystem directory.

The archive is what ``ctr images import`` reads, so the local cluster's real nodes get images
without a registry. Layer entries are sorted, owned by root and dated 0, so the same rootfs gives
the same digests.

usage: oci_image.py --rootfs DIR --name REF --out FILE [--entrypoint JSON] [--cmd JSON] [--env K=V]...
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
from pathlib import Path


def _layer(rootfs: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = sorted(p for p in rootfs.rglob("*"))
        for path in paths:
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(rootfs)))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            if info.isreg():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    return buf.getvalue()


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return f"sha256:{digest}"


def build(rootfs: Path, name: str, out: Path, entrypoint: list[str], cmd: list[str], env: list[str]) -> None:
    layer = _layer(rootfs)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    compressed = gzip.compress(layer, compresslevel=1, mtime=0)
    tmp = out.with_suffix(out.suffix + ".tmp")
    with tarfile.open(tmp, "w") as tar:
        layer_digest = _blob(tar, compressed)
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": entrypoint or None, "Cmd": cmd or None, "Env": env, "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
        config_bytes = json.dumps(config, sort_keys=True).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _blob(tar, config_bytes),
                "size": len(config_bytes),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": layer_digest,
                    "size": len(compressed),
                }
            ],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": _blob(tar, manifest_bytes),
                    "size": len(manifest_bytes),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
        layout = b'{"imageLayoutVersion": "1.0.0"}'
        for member, data in (("oci-layout", layout), ("index.json", json.dumps(index).encode())):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rootfs", type=Path, required=True)
    parser.add_argument("--name", required=True, help="full image reference, e.g. kubectl-tao.local/busybox:1.35.0")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--entrypoint", default="[]", help="JSON list")
    parser.add_argument("--cmd", default="[]", help="JSON list")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE (repeat)")
    args = parser.parse_args(argv)
    if not args.rootfs.is_dir():
        print(f"ERROR: --rootfs {args.rootfs}: not a directory", file=sys.stderr)
        return 2
    env = args.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    build(args.rootfs, args.name, args.out, json.loads(args.entrypoint), json.loads(args.cmd), env)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
