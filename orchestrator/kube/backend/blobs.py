"""Content-addressed documents of ``KubeFleetBackend`` (the calibration plan).

* **Blobs** (the calibration plan, kept out of workflow history): immutable ConfigMaps in the
  backend's plan namespace (``plan_namespace``; else its fleet namespace, else ``default``; the
  worker in a pod passes the pod's own namespace, docs/decisions.md), named ``calibrator-blob-<sha256>`` (and
  ``-<n>`` for further chunks), gzip-compressed in ``binaryData`` chunks of at most 900 kB so any
  plan fits under etcd's object limit. Reads verify the SHA-256 of the reassembled bytes.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from typing import Any

from orchestrator.kube.backend.access import KubeAccess, object_annotations
from orchestrator.kube.backend.port import BackendError, NotFoundError
from orchestrator.kube.client import FIELD_MANAGER, status_code

CONFIG_MAP = ("v1", "ConfigMap")
BLOB_PREFIX = "calibrator-blob-"
BLOB_CHUNKS_ANNOTATION = "calibrator.dev/chunks"
BLOB_CHUNK_BYTES = 900_000


class BlobStore(KubeAccess):
    """``FleetBackend.put_blob``, ``get_blob`` and ``delete_blob``: immutable ConfigMaps."""

    def _blob_namespace(self) -> str:
        return self._plan_namespace

    def _put_blob(self, digest: str, data: bytes) -> None:
        if hashlib.sha256(data).hexdigest() != digest:
            raise ValueError(f"blob {digest} does not match its content")
        packed = gzip.compress(data, mtime=0)
        chunks = [
            packed[i : i + BLOB_CHUNK_BYTES] for i in range(0, len(packed), BLOB_CHUNK_BYTES)
        ] or [b""]
        ns = self._blob_namespace()
        # Further chunks first: a reader that finds chunk 0 finds them all.
        for index in [*range(1, len(chunks)), 0]:
            name = BLOB_PREFIX + digest + (f"-{index}" if index else "")
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {"app.kubernetes.io/managed-by": "fleet-calibrator"},
                    "annotations": {BLOB_CHUNKS_ANNOTATION: str(len(chunks))},
                },
                "immutable": True,
                "binaryData": {"data": base64.b64encode(chunks[index]).decode()},
            }
            self._res(CONFIG_MAP).server_side_apply(
                body=body,
                name=name,
                namespace=ns,
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
                serialize=False,  # the answer is not read: no ResourceInstance of ~1 MB to build
            )

    def _get_blob(self, digest: str) -> bytes:
        ns = self._blob_namespace()
        first = self._get(CONFIG_MAP, ns, BLOB_PREFIX + digest)
        count = int(object_annotations(first).get(BLOB_CHUNKS_ANNOTATION, "1"))
        parts = [first] + [
            self._get(CONFIG_MAP, ns, f"{BLOB_PREFIX}{digest}-{i}") for i in range(1, count)
        ]
        packed = b"".join(
            base64.b64decode((p.get("binaryData") or {}).get("data", "")) for p in parts
        )
        data = gzip.decompress(packed)
        if hashlib.sha256(data).hexdigest() != digest:
            raise BackendError(f"blob {digest}: stored bytes do not match the digest")
        return data

    def _delete_blob(self, digest: str) -> None:
        """Chunk 0 first, so that no reader finds a partial blob; then the rest, as it counted."""
        ns = self._blob_namespace()
        try:
            first = self._get(CONFIG_MAP, ns, BLOB_PREFIX + digest)
        except NotFoundError:
            return
        count = int(object_annotations(first).get(BLOB_CHUNKS_ANNOTATION, "1"))
        for name in [BLOB_PREFIX + digest] + [
            f"{BLOB_PREFIX}{digest}-{i}" for i in range(1, count)
        ]:
            try:
                self._res(CONFIG_MAP).delete(name=name, namespace=ns)
            except Exception as err:
                if status_code(err) != 404:
                    raise

    async def put_blob(self, digest: str, data: bytes) -> None:
        """Store an immutable, content-addressed document as ConfigMap chunks."""
        attributes: dict[str, str | int] = {
            "calibrator.blob.digest": digest,
            "calibrator.blob.bytes": len(data),
        }
        await self._call("put_blob", attributes, lambda: self._put_blob(digest, data))

    async def get_blob(self, digest: str) -> bytes:
        """Read and verify a document stored by ``put_blob``."""
        attributes = {"calibrator.blob.digest": digest}
        return await self._call("get_blob", attributes, lambda: self._get_blob(digest))

    async def delete_blob(self, digest: str) -> None:
        """Delete a document stored by ``put_blob`` (all its chunks; gone already is fine)."""
        attributes = {"calibrator.blob.digest": digest}
        await self._call("delete_blob", attributes, lambda: self._delete_blob(digest))
