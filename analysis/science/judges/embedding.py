"""Embedding metrics from local checkpoints: CLIPScore, CLIP-I and DINO. No Django.

The optional extra (``pip install .[clip]`` or ``-r requirements-clip.txt``) brings torch and
transformers; this module imports them only when a model is loaded, so the site runs without
them. Checkpoints are *directories* in the Hugging Face ``save_pretrained`` layout (config.json,
weights, preprocessor_config.json, and for CLIP the tokenizer files). They are never downloaded:
the hub is switched to offline mode and every load uses ``local_files_only=True``.

Dimensions (names as in the VIEScore/ImagenHub released auto-metrics, so imported and computed
scores meet downstream):

- ``CLIP_Score`` (prompt–image, Hessel et al. 2021): ``w · max(cos(E_img, E_txt), 0)``. ImagenHub
  (seed 003, Table 5) and the VIEScore release report the plain cosine (≈ 0.21–0.30 for real
  models), i.e. ``w = 1``, the default here; Hessel's paper uses ``w = 2.5``, torchmetrics
  ``w = 100`` (param ``clip_score_weight``). The raw cosine is kept in ``details``.
- ``CLIP_I`` (image–image, Textual Inversion): cosine between the CLIP image embeddings of the
  output and each reference image, in [−1, 1].
- ``DINO`` (image–image, DreamBooth): cosine between DINO ViT CLS embeddings (the final
  layer-normed CLS token of a ``ViTModel`` or ``Dinov2Model``), in [−1, 1].

References for CLIP-I and DINO depend on the task: the source image for editing tasks (as in
ImagenHub's Table 5), every image of each subject set for subject-driven tasks. With several
images in a set the set's value is the mean over its images; with two sets (multi-concept
composition) the value is the mean of the two set values, each kept as a sub-score. Tasks with
neither (text-to-image, control-guided) have no CLIP-I/DINO.

All images are decoded once per batch (deduplicated by content hash) and embedded in batches
on the CPU under ``torch.no_grad``; cosines are taken in float64 so identical images give 1.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from analysis.science.judges.evaluators import FAILED, DimensionScore

CLIP_SCORE, CLIP_I, DINO = "CLIP_Score", "CLIP_I", "DINO"
DIMENSIONS = (CLIP_SCORE, CLIP_I, DINO)
IMAGE_IMAGE = (CLIP_I, DINO)
VERSION = "embedding-v1"  # bump when a formula changes, so cached embedding scores are recomputed
DEFAULT_BATCH_SIZE = 16
MAX_BATCH_SIZE = 256

EDITING_TASKS = ("mask_guided_editing", "text_guided_editing")
REFERENCE_ROLES = {
    "mask_guided_editing": ("source",),
    "text_guided_editing": ("source",),
    "subject_driven_generation": ("subject_1",),
    "subject_driven_editing": ("subject_1",),
    "multi_concept_composition": ("subject_1", "subject_2"),
}

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
CLIP_TYPES = ("clip",)
DINO_TYPES = ("vit", "dinov2", "dinov2_with_registers")  # DINO ViT-S/16 is a "vit" checkpoint


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable or of the wrong kind, or torch is not installed."""


# -------------------------------------------------------------------------------- params

@dataclass(frozen=True)
class EmbeddingParams:
    metrics: tuple[str, ...]
    clip_checkpoint: str = ""
    dino_checkpoint: str = ""
    clip_score_weight: float = 1.0
    batch_size: int = DEFAULT_BATCH_SIZE


def parse_params(params: dict) -> EmbeddingParams:
    """Validate a judge's params; raise ``ValueError`` with the reason.

    Keys: ``clip_checkpoint`` and/or ``dino_checkpoint`` (local directories), ``metrics`` (a
    subset of CLIP_Score, CLIP_I, DINO; default: every metric the given checkpoints allow),
    ``clip_score_weight`` (> 0, default 1), ``batch_size`` (1–256, default 16). Paths are
    checked by :func:`check_checkpoints`, not here.
    """
    known = {"clip_checkpoint", "dino_checkpoint", "metrics", "clip_score_weight", "batch_size"}
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; use {', '.join(sorted(known))}")
    clip, dino = params.get("clip_checkpoint") or "", params.get("dino_checkpoint") or ""
    if not isinstance(clip, str) or not isinstance(dino, str):
        raise ValueError("clip_checkpoint and dino_checkpoint must be directory paths (strings)")
    chosen = params.get("metrics")
    if chosen is None:
        chosen = ([CLIP_SCORE, CLIP_I] if clip else []) + ([DINO] if dino else [])
    if not isinstance(chosen, list) or not all(isinstance(m, str) for m in chosen):
        raise ValueError("params.metrics must be a list of metric names")
    bad = sorted(set(chosen) - set(DIMENSIONS))
    if bad:
        raise ValueError(f"unknown metric(s) {', '.join(bad)}; use {', '.join(DIMENSIONS)}")
    if not chosen:
        raise ValueError("give clip_checkpoint (CLIPScore, CLIP-I) and/or dino_checkpoint (DINO): a local directory")
    if {CLIP_SCORE, CLIP_I} & set(chosen) and not clip:
        raise ValueError("CLIP_Score and CLIP_I need params.clip_checkpoint: a local CLIP checkpoint directory")
    if DINO in chosen and not dino:
        raise ValueError("DINO needs params.dino_checkpoint: a local DINO ViT checkpoint directory")
    weight = params.get("clip_score_weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
        raise ValueError("clip_score_weight must be a positive number (1 = plain cosine as ImagenHub reports, 2.5 = Hessel et al.)")
    batch = params.get("batch_size", DEFAULT_BATCH_SIZE)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH_SIZE:
        raise ValueError(f"batch_size must be a whole number from 1 to {MAX_BATCH_SIZE}")
    uses_clip = bool({CLIP_SCORE, CLIP_I} & set(chosen))
    return EmbeddingParams(
        metrics=tuple(m for m in DIMENSIONS if m in chosen),
        clip_checkpoint=clip if uses_clip else "",
        dino_checkpoint=dino if DINO in chosen else "",
        clip_score_weight=float(weight),
        batch_size=batch,
    )


def applicable(metrics: tuple[str, ...], task_type: str) -> tuple[str, ...]:
    """The chosen metrics that a task's items can have (CLIP-I/DINO need reference images)."""
    return tuple(m for m in metrics if m == CLIP_SCORE or task_type in REFERENCE_ROLES)


def _check_directory(path: str, what: str, model_types: tuple[str, ...] = ()) -> Path:
    directory = Path(path).expanduser()
    if not directory.is_absolute():
        raise CheckpointError(f"{what} checkpoint {path!r} must be an absolute path to a local directory")
    if not directory.is_dir():
        raise CheckpointError(
            f"{what} checkpoint directory {path} does not exist; save the model there first "
            "(save_pretrained); checkpoints are never downloaded"
        )
    if not (directory / "config.json").is_file():
        raise CheckpointError(f"{what} checkpoint {path} has no config.json (expected a save_pretrained directory)")
    if not any((directory / name).is_file() for name in _WEIGHT_FILES):
        raise CheckpointError(f"{what} checkpoint {path} has no weights ({' or '.join(_WEIGHT_FILES)})")
    if model_types:
        try:
            model_type = json.loads((directory / "config.json").read_text()).get("model_type")
        except (ValueError, AttributeError, OSError) as exc:
            raise CheckpointError(f"{what} checkpoint {path}: config.json is not readable JSON ({exc})") from None
        if model_type not in model_types:
            raise CheckpointError(f"{path} holds a {model_type!r} model, not a {what} model ({' or '.join(model_types)})")
    return directory


def check_roots(params: EmbeddingParams, roots: list[str]) -> None:
    """Raise :class:`CheckpointError` unless every checkpoint lies under one of ``roots`` (the
    operator's model directories), judged on the resolved path so ``..`` and symlinks cannot leave."""
    allowed = [Path(root).expanduser().resolve() for root in roots]
    for what, path in (("clip_checkpoint", params.clip_checkpoint), ("dino_checkpoint", params.dino_checkpoint)):
        if not path:
            continue
        if not allowed:
            raise CheckpointError(
                f"{what}: the operator lists no checkpoint directories (JUDGE_CHECKPOINT_DIRS); ask staff for a shared judge"
            )
        real = Path(path).expanduser().resolve()
        if not any(real == root or root in real.parents for root in allowed):
            raise CheckpointError(f"{what} must be inside a checkpoint directory the operator lists (JUDGE_CHECKPOINT_DIRS)")


def check_checkpoints(params: EmbeddingParams) -> None:
    """Raise :class:`CheckpointError` when a checkpoint directory is missing or incomplete."""
    if params.clip_checkpoint:
        _check_directory(params.clip_checkpoint, "CLIP", CLIP_TYPES)
    if params.dino_checkpoint:
        _check_directory(params.dino_checkpoint, "DINO", DINO_TYPES)


def require_backend() -> None:
    """Raise :class:`CheckpointError` when torch or transformers is not installed."""
    _backend()


def checkpoints_fingerprint(params: EmbeddingParams) -> str:
    """A short hash of the checkpoints' files (names, sizes, mtimes; config texts in full).

    Part of every cache key, so replacing the weights behind the same path recomputes scores.
    """
    digest = hashlib.sha256(VERSION.encode())
    for path in (params.clip_checkpoint, params.dino_checkpoint):
        if not path:
            continue
        directory = _check_directory(path, "embedding")
        digest.update(str(directory).encode())
        for entry in sorted(directory.iterdir()):
            if not entry.is_file():
                continue
            stat = entry.stat()
            digest.update(f"{entry.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
            if entry.suffix == ".json" and stat.st_size < 4_000_000:
                digest.update(entry.read_bytes())
    return "embedding:" + digest.hexdigest()[:24]


# ------------------------------------------------------------------------------- models

_lock = threading.Lock()
_loaded: dict[tuple[str, str, str], object] = {}


def _backend():
    # Offline before transformers/huggingface_hub read their settings; loads also pass
    # local_files_only=True, which holds even if transformers was imported earlier.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise CheckpointError(
            f"the embedding judges need torch and transformers ({exc.name} is missing): "
            "pip install -r requirements-clip.txt (or pip install .[clip])"
        ) from None
    return torch, transformers


def _load(loader, path: str, what: str):
    try:
        return loader(path, local_files_only=True)
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError… for a bad directory
        raise CheckpointError(f"cannot load the {what} from {path}: {type(exc).__name__}: {exc}") from None


class ClipEncoder:
    """A CLIP model with its tokenizer and image processor; unit-length embeddings as float64."""

    def __init__(self, path: str):
        torch, transformers = _backend()
        self.torch = torch
        self.model = _load(transformers.CLIPModel.from_pretrained, path, "CLIP model").eval()
        self.processor = _load(transformers.AutoImageProcessor.from_pretrained, path, "CLIP image processor")
        self.tokenizer = _load(transformers.AutoTokenizer.from_pretrained, path, "CLIP tokenizer")
        self.max_tokens = int(self.model.config.text_config.max_position_embeddings)

    def images(self, pictures: list[Image.Image]) -> np.ndarray:
        with self.torch.no_grad():
            pixels = self.processor(images=pictures, return_tensors="pt")["pixel_values"]
            # Projection of the pooled vision output: the same as get_image_features, spelled out
            # because that method's return type changed between transformers 4 and 5.
            pooled = self.model.vision_model(pixel_values=pixels).pooler_output
            return _unit(self.model.visual_projection(pooled))

    def texts(self, texts: list[str]) -> np.ndarray:
        with self.torch.no_grad():
            encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_tokens, return_tensors="pt")
            pooled = self.model.text_model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).pooler_output
            return _unit(self.model.text_projection(pooled))


class DinoEncoder:
    """A DINO ViT (``ViTModel`` or ``Dinov2Model``); the embedding is the final CLS token."""

    def __init__(self, path: str):
        torch, transformers = _backend()
        self.torch = torch
        self.model = _load(transformers.AutoModel.from_pretrained, path, "DINO model").eval()
        if type(self.model).__name__ not in ("ViTModel", "Dinov2Model", "Dinov2WithRegistersModel"):
            raise CheckpointError(f"{path} holds a {type(self.model).__name__}, not a DINO ViT (ViTModel or Dinov2Model)")
        self.processor = _load(transformers.AutoImageProcessor.from_pretrained, path, "DINO image processor")

    def images(self, pictures: list[Image.Image]) -> np.ndarray:
        with self.torch.no_grad():
            pixels = self.processor(images=pictures, return_tensors="pt")["pixel_values"]
            return _unit(self.model(pixel_values=pixels).last_hidden_state[:, 0])


def _unit(tensor) -> np.ndarray:
    array = tensor.detach().cpu().numpy().astype(np.float64)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1.0, norms)


def _encoder(cls, path: str, fingerprint: str):
    """One loaded model per (kind, path, files) and process: a worker loads weights once."""
    key = (cls.__name__, path, fingerprint)
    with _lock:
        if key not in _loaded:
            _loaded[key] = cls(path)
        return _loaded[key]


# ------------------------------------------------------------------------------ scoring

@dataclass
class EmbeddingItem:
    """What the metrics need from one study item. ``conditions`` maps a role to all of its
    images in position order (a subject set may hold several)."""

    task_type: str
    prompt: str
    output: bytes
    conditions: dict[str, list[bytes]] = field(default_factory=dict)

    def references(self) -> dict[str, list[bytes]]:
        """Reference images for CLIP-I/DINO by role; empty when the task has none."""
        return {role: self.conditions.get(role, []) for role in REFERENCE_ROLES.get(self.task_type, ())}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _decode(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB")


def _embed_all(encode, images: dict[str, bytes], batch_size: int) -> dict[str, np.ndarray]:
    """Embeddings by content hash; images are decoded a batch at a time to bound memory."""
    keys = list(images)
    out: dict[str, np.ndarray] = {}
    for start in range(0, len(keys), batch_size):
        chunk = keys[start:start + batch_size]
        vectors = encode([_decode(images[k]) for k in chunk])
        out.update(zip(chunk, vectors))
    return out


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.clip(np.dot(a, b), -1.0, 1.0))


def _image_similarity(name: str, out: np.ndarray, refs: dict[str, list[str]], table: dict[str, np.ndarray]) -> DimensionScore:
    per_role = {role: [_cosine(out, table[h]) for h in hashes] for role, hashes in refs.items()}
    means = {role: float(np.mean(values)) for role, values in per_role.items()}
    value = float(np.mean(list(means.values())))
    described = ", ".join(f"{role} ({len(per_role[role])} image{'s' if len(per_role[role]) != 1 else ''}): {m:.4f}"
                          for role, m in means.items())
    return DimensionScore(
        name, value, sub_scores=[round(m, 6) for m in means.values()] if len(means) > 1 else [],
        rationale=f"{name} cosine with the reference images, {described}",
        details={"per_role": {role: [round(v, 6) for v in values] for role, values in per_role.items()}},
    )


def score_items(items: list[EmbeddingItem], params: EmbeddingParams, *, fingerprint: str = "") -> list[list[DimensionScore]]:
    """The chosen metrics for each item, in order; one list of scores per item.

    Metrics that do not apply to an item's task are left out. An item whose task needs
    reference images but lacks them gets one failed ``error`` score saying which are missing.
    Raises :class:`CheckpointError` when a model cannot be loaded (the run fails as a whole).
    """
    wanted = set(params.metrics)
    plans: list[dict | DimensionScore] = []
    clip_images: dict[str, bytes] = {}
    dino_images: dict[str, bytes] = {}
    prompts: list[str] = []
    for item in items:
        out_hash = _sha(item.output)
        refs = {role: [(_sha(d), d) for d in images] for role, images in item.references().items()}
        image_metrics = [m for m in IMAGE_IMAGE if m in wanted] if refs else []
        missing = [role for role, images in refs.items() if not images]
        if image_metrics and missing:
            plans.append(DimensionScore("error", None, FAILED, rationale=(
                f"{' and '.join(image_metrics)} need the {' and '.join(missing)} image(s) of this "
                f"{item.task_type} item, which it does not have")))
            continue
        chosen = ([CLIP_SCORE] if CLIP_SCORE in wanted else []) + image_metrics
        for name, pool in ((CLIP_I, clip_images), (DINO, dino_images)):
            if name in chosen:
                pool[out_hash] = item.output
                pool.update({h: d for pairs in refs.values() for h, d in pairs})
        if CLIP_SCORE in chosen:
            clip_images[out_hash] = item.output
            prompts.append(item.prompt)
        plans.append({"out": out_hash, "refs": {r: [h for h, _ in pairs] for r, pairs in refs.items()}, "chosen": chosen})

    clip_table: dict[str, np.ndarray] = {}
    dino_table: dict[str, np.ndarray] = {}
    text_table: dict[str, np.ndarray] = {}
    if clip_images or prompts:
        clip = _encoder(ClipEncoder, params.clip_checkpoint, fingerprint)
        clip_table = _embed_all(clip.images, clip_images, params.batch_size)
        unique_prompts = list(dict.fromkeys(prompts))
        for start in range(0, len(unique_prompts), params.batch_size):
            chunk = unique_prompts[start:start + params.batch_size]
            text_table.update(zip(chunk, clip.texts(chunk)))
    if dino_images:
        dino = _encoder(DinoEncoder, params.dino_checkpoint, fingerprint)
        dino_table = _embed_all(dino.images, dino_images, params.batch_size)

    results: list[list[DimensionScore]] = []
    for item, plan in zip(items, plans):
        if isinstance(plan, DimensionScore):
            results.append([plan])
            continue
        scores = []
        for name in plan["chosen"]:
            if name == CLIP_SCORE:
                cosine = _cosine(clip_table[plan["out"]], text_table[item.prompt])
                value = params.clip_score_weight * max(cosine, 0.0)
                scores.append(DimensionScore(
                    CLIP_SCORE, value, rationale=f"CLIP cosine of image and prompt {cosine:.4f} (w = {params.clip_score_weight:g})",
                    details={"cosine": round(cosine, 6), "weight": params.clip_score_weight},
                ))
            else:
                table = clip_table if name == CLIP_I else dino_table
                scores.append(_image_similarity(name, table[plan["out"]], plan["refs"], table))
        results.append(scores)
    return results
