"""Real models by name, `SOURCE:NAME`, each source a small adapter giving what a built-in SampleModel gives:
one module per source (torchvision_models, timm_models, hf_models, diffusers_models, file_models) over common.py.

Plan. A built-in keeps its plain name (`captioner`, `resnet50`, `flux`); any other name is `SOURCE:NAME`:

    torchvision:NAME  torchvision.models.get_model(NAME, weights=None): the classifiers of list_models()
    timm:NAME         timm.create_model(NAME, pretrained=False); the input size from its own data config
    hf:MODEL_TYPE     transformers AutoConfig.for_model(MODEL_TYPE, **sizes) -> AutoModelFor{CausalLM,MaskedLM}
                      .from_config: token ids in, use_cache=False (as PyTorch's dynamo harness feeds them)
    diffusers:flux    FluxTransformer2DModel(**config) with Flux's real inputs (latents, text states, pooled
                      projections, timestep, ids, guidance)
    file:PATH.py      a file of your own (the interface is file_models.FILE_INTERFACE; examples/my_model.py)

Each adapter (a `Source`) answers the same questions: which names exist (the catalog the Run page searches and
`python -m tcore models` lists), the presets (`tiny`, minutes-free on a CPU, then the published size, whose
parameter count the title states), default preset and batch per device, how to build the model on a device,
a batch and its loss, the varying dimension for dynamic shapes (sequence length for text, image tokens for
Flux, the batch size for image classifiers), whether it is convolutional (channels_last), the repeated block
classes for regional compilation (diffusers' `_repeated_blocks`, compiled with the model's own
`compile_repeated_blocks`; transformers' `_no_split_modules`; else the outermost submodule classes that repeat),
and the lines that build it for copy-as-code. A `RealModel` wraps one adapter and one name with the methods
the worker, the estimates and the snippet already call on a SampleModel, so nothing downstream branches on
the source.

Never the network: weights are random (weights=None, pretrained=False, from_config), and HF_HUB_OFFLINE /
TRANSFORMERS_OFFLINE / HF_DATASETS_OFFLINE are set before transformers or diffusers is imported, so a
construction that reaches for the hub fails; `NeedsDownload` then says why.

Memory-free builds (the memory estimate, FLOPs): torchvision, timm and diffusers build and run on the "meta"
device; transformers' decoders look at their position ids (`.item()`) unless the tensors are fake, so they run
under FakeTensorMode (`abstract()`).
"""
from __future__ import annotations

import functools

# the names the rest of the lab reaches here, as sample_models.sources.quiet_dropout and so on (the snippet's code calls
# quiet_dropout)
from sample_models.first_imports import IMPORT_LOCK
from sample_models.sources.common import (  # noqa: F401
    LAB,
    OFFLINE,
    QUIET,
    CannotBuild,
    NeedsDownload,
    RealModel,
    Source,
    UnknownModel,
    _count,
    go_offline,
    offline_build,
    quiet_dropout,
    repeated_classes,
)
from sample_models.sources.diffusers_models import DiffusersSource
from sample_models.sources.file_models import (  # noqa: F401
    FILE_INTERFACE,
    SOURCES_FILE,
    FileSource,
    file_model,
)
from sample_models.sources.hf_models import HfSource
from sample_models.sources.timm_models import TimmSource
from sample_models.sources.torchvision_models import TorchvisionSource

SOURCES: dict[str, Source] = {s.key: s for s in (TorchvisionSource(), TimmSource(), HfSource(), DiffusersSource(),
                                                 SOURCES_FILE)}


def entry(name: str) -> RealModel:
    """The entry of SOURCE:NAME. Raises ValueError, saying why, for a name that cannot be read here: whatever its
    library raises while building it on "meta" to read its sizes is said in one line (CannotBuild), never a
    traceback in place of the check before a run."""
    try:
        if name.startswith("file:") and name[5:]:  # not cached by name: a file changes, and its card with it
            # Outside the lock: the app's process never imports a file, and its card may come from a child that
            # reads the file for seconds; a worker, which does import it, has one thread.
            return SOURCES_FILE.entry(name[5:])
        with IMPORT_LOCK:  # the library's first import, one thread at a time (sample_models.first_imports)
            return _entry(name)
    except ValueError:  # UnknownModel, NeedsDownload, ...: already in words
        raise
    except Exception as e:  # noqa: BLE001 (a library's error while reading the model, said as the reason)
        text = str(e).strip().splitlines()[0][:300] if str(e).strip() else "no message"
        raise CannotBuild(f"{name} could not be built here to read its sizes ({type(e).__name__}: {text}); "
                          "pick another model, or another version of its library") from e


@functools.lru_cache(maxsize=None)
def _entry(name: str) -> RealModel:
    source_key, sep, ref = name.partition(":")
    if not sep or source_key not in SOURCES or not ref:
        raise UnknownModel(f"unknown model {name!r}: name a built-in, or SOURCE:NAME with SOURCE one of "
                           f"{', '.join(SOURCES)} (python -m tcore models lists them)")
    return SOURCES[source_key].entry(ref)


def catalog(source: str, pattern: str = "") -> list[str]:
    """Names of one source, as `SOURCE:NAME`, filtered by a case-insensitive substring or a *glob*."""
    import fnmatch
    if source not in SOURCES:
        raise UnknownModel(f"unknown source {source!r}; choose one of: {', '.join(SOURCES)}")
    with IMPORT_LOCK:
        names = _names(source)
    if pattern:
        p = pattern.lower()
        names = [n for n in names if (fnmatch.fnmatch(n.lower(), p) if any(c in p for c in "*?[") else p in n.lower())]
    return [f"{source}:{n}" for n in names]


@functools.lru_cache(maxsize=None)
def _names(source: str) -> tuple[str, ...]:
    return tuple(SOURCES[source].names())
