"""The command line's flags for an Experiment, one per field with the field's own sentence as its help, and the
Experiment they make: the practical defaults of the model, the device and the task where a flag is left out
(`python -m tcore run`, bench/model_sweep.py)."""
from __future__ import annotations

import argparse
import dataclasses

from tcore.experiment.spec import CHOICES, Experiment, choice_docs, describe

# Fields whose default depends on the model, the device and the task (tcore.experiment.device.practical_defaults).
_DEVICE_DEFAULTS = ("preset", "batch_size", "precision", "channels_last", "prompt_len", "new_tokens")
_TRISTATE = {"none": None, "true": True, "false": False}
_TRISTATE_NAMES = {v: k for k, v in _TRISTATE.items()}
MODEL_HELP = ("captioner, resnet50 or flux (built in), or SOURCE:NAME: torchvision:vit_b_16, timm:efficientnet_b0, "
              "hf:llama, diffusers:flux, file:examples/my_model.py (`python -m tcore models` lists them)")


def field_help(name: str) -> str:
    """A field's own sentence from tcore.experiment.spec, then one line per choice: the text the Run page shows too."""
    lines = [describe(name)] + [f"  {_TRISTATE_NAMES.get(v, v)}: {doc}" for v, doc in choice_docs(name).items()]
    return "\n".join(lines).replace("%", "%%")  # argparse formats help with %


def add_spec_args(parser: argparse.ArgumentParser) -> None:
    """One option per Experiment field, so the command line can say everything the app can."""
    for f in dataclasses.fields(Experiment):
        flag, text = "--" + f.name.replace("_", "-"), field_help(f.name)
        if f.name in _DEVICE_DEFAULTS:
            text += "\n(default: what a practitioner would pick for the model, device and task)"
            if f.name == "channels_last":
                parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=text)
            elif f.name == "precision":
                parser.add_argument(flag, choices=CHOICES[f.name], default=None, help=text)
            else:
                parser.add_argument(flag, type=str if f.name == "preset" else int, default=None, help=text)
        elif f.name == "model":  # any SOURCE:NAME: the spec checks it and says how to find the right name
            parser.add_argument(flag, default=f.default, help=text + "\n" + MODEL_HELP)
        elif f.name == "dynamic":
            parser.add_argument(flag, choices=list(_TRISTATE), default="none", help=text)
        elif isinstance(f.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=text)
        elif f.name in CHOICES:
            parser.add_argument(flag, choices=CHOICES[f.name], default=f.default, help=text)
        else:
            kind = int if f.name == "timed_steps" else type(f.default)
            parser.add_argument(flag, type=kind, default=f.default, help=text)


def experiment_from_args(args: argparse.Namespace) -> Experiment:
    from tcore.experiment.device import practical_defaults
    from tcore.lab.run.runs import preflight

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(Experiment)}
    if values["model"].startswith("file:"):  # the worker runs in the lab's folder, not this one
        from sample_models.sources import file_model
        values["model"] = file_model(values["model"])
    values["dynamic"] = _TRISTATE[values["dynamic"]]
    unset = [name for name in _DEVICE_DEFAULTS if values[name] is None]
    if unset:
        import sample_models

        # Only to resolve the device: at a preset the model has (the spec's "tiny" is not every file model's); a
        # model that cannot be built is refused by the spec below, in its own words.
        try:
            first = {"preset": next(iter(sample_models.get(values["model"]).presets))}
        except ValueError:
            first = {}
        device, _ = preflight(Experiment(model=values["model"], device=values["device"],
                                         **({"preset": values["preset"]} if values["preset"] else first)))
        defaults = practical_defaults(values["model"], device, values["task"])
        values.update({name: defaults[name] for name in unset})
    return Experiment(**values)
