"""The inputs of `shardify.check.nnunet`: the raw dataset's files, the converted dataset's cases,
the plans, and nnU-Net's own preprocessor. Every refusal is a CheckError naming the file."""

import json
import os
from dataclasses import dataclass

from ._dataset import Dataset

PLANS_FILE = "nnUNetPlans.json"
INSTALL = "pip install nnunetv2"
_CASE_PREFIX = "imagesTr/"  # a converted training case's `path` (docs/fields.md): imagesTr/<case>
_IDENTITY = [0, 1, 2]


class CheckError(Exception):
    """The check could not run: bad input (the message names the file or option), nnunetv2
    missing, or nnU-Net's preprocessing failing on a case."""


class NnunetUnavailable(CheckError, ImportError):
    """nnunetv2 (or one of its dependencies) cannot be imported."""


@dataclass
class Context:
    raw: str
    dataset_path: str
    ds: Dataset
    fields: list
    held: dict  # case name -> sample index
    splits: list  # (name, range of sample indices)
    plans_path: str
    plans_text: str
    converted: str
    configuration: str
    transpose_forward: list
    minus_one_stored: bool
    chosen: list
    files: dict  # case name -> (image files, label file)
    dataset_json: dict
    nnunet: str = ""
    modules: tuple = ()  # (DefaultPreprocessor, PlansManager)
    managers: tuple = ()  # (PlansManager, ConfigurationManager)

    @property
    def transpose_backward(self):
        """Array axis a of the dataset is nnU-Net's axis transpose_backward[a]."""
        return [self.transpose_forward.index(a) for a in range(len(self.transpose_forward))]

    @property
    def image_dtype(self):
        return next(f["dtype"] for f in self.ds.fields if f["name"] == "image")

    def split_of(self, index):
        return next((name for name, r in self.splits if index in r), "?")


def prepare(raw, dataset, cases, plans, configuration):
    """Reads and checks every input, then imports nnU-Net: a Context ready for run_case."""
    raw, dataset = os.fspath(raw), os.fspath(dataset)
    dataset_json = _raw_dataset_json(raw)
    ds = _open(dataset)
    options = ds.provenance.get("options", {})
    plans_path = _plans_path(dataset, plans, options)
    plans_json = _read_json(plans_path, "plans file")
    held = _held_cases(ds, dataset)
    context = Context(raw=raw, dataset_path=dataset, ds=ds, fields=[f["name"] for f in ds.fields], held=held,
                      splits=[(name, ds.split_range(name)) for name in ds.splits], plans_path=plans_path,
                      plans_text=_plans_text(plans_path, plans_json), converted=_converted(options),
                      configuration=_configuration(configuration, options, plans_json, plans_path),
                      transpose_forward=_transpose_forward(plans_json, plans_path, options, dataset),
                      minus_one_stored="zscore_region" in options, chosen=_choose(cases, held, dataset),
                      files={}, dataset_json=dataset_json)
    for name in ("image", "mask"):
        if name not in context.fields:
            raise CheckError(f"{dataset}: no '{name}' field; it has {context.fields}")
    for name in context.chosen:
        context.files[name] = _case_files(raw, dataset_json, name)
    _import_nnunet(context)
    return context


def run_case(context, name):
    """nnU-Net's DefaultPreprocessor.run_case on one case: (data, seg, properties)."""
    preprocessor_class, _ = context.modules
    images, seg = context.files[name]
    try:
        return preprocessor_class(verbose=False).run_case(images, seg, *context.managers, context.dataset_json)
    except Exception as e:  # noqa: BLE001 (any failure inside nnU-Net ends the check, naming the case)
        raise CheckError(f"nnU-Net's preprocessing failed on case {name} ({', '.join(images)}, {seg}): "
                         f"{type(e).__name__}: {e}") from e


def _import_nnunet(context):
    try:
        from nnunetv2.preprocessing.preprocessors.default_preprocessor import DefaultPreprocessor
        from nnunetv2.utilities.plans_handling.plans_handler import PlansManager
    except ImportError as e:
        missing = getattr(e, "name", None) or ""
        if missing.split(".")[0] == "nnunetv2" or not missing:
            raise NnunetUnavailable(f"nnunetv2 is not importable ({e}); this check runs nnU-Net's own "
                                    f"preprocessing: install it into this Python ({INSTALL})") from e
        raise NnunetUnavailable(f"nnunetv2 is there but importing it failed: {e} (a dependency of nnunetv2; "
                                f"reinstalling it with pip brings them: {INSTALL})") from e
    import nnunetv2
    context.nnunet = " ".join(filter(None, ("nnunetv2", _version(), "from", os.path.dirname(nnunetv2.__file__ or ""))))
    context.modules = (DefaultPreprocessor, PlansManager)
    try:
        manager = PlansManager(context.plans_path)
        context.managers = (manager, manager.get_configuration(context.configuration))
    except Exception as e:  # noqa: BLE001
        raise CheckError(f"{context.plans_path}: nnU-Net's PlansManager refused it: {type(e).__name__}: {e}") from e


def _version():
    try:
        from importlib.metadata import version
        return version("nnunetv2")
    except Exception:  # noqa: BLE001 (a source checkout on PYTHONPATH has no package metadata)
        return ""


def _read_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except FileNotFoundError:
        raise CheckError(f"{path}: no such file ({what})") from None
    except (OSError, ValueError) as e:
        raise CheckError(f"{path}: cannot read the {what}: {e}") from None
    if not isinstance(value, dict):
        raise CheckError(f"{path}: the {what} is not a JSON object")
    return value


def _raw_dataset_json(raw):
    if not os.path.isdir(raw):
        raise CheckError(f"{raw}: no such directory (the nnU-Net raw dataset)")
    j = _read_json(os.path.join(raw, "dataset.json"), "nnU-Net raw dataset's dataset.json")
    if not isinstance(j.get("channel_names", j.get("modality")), dict):
        raise CheckError(f"{os.path.join(raw, 'dataset.json')}: no 'channel_names' object")
    return j


def _open(dataset):
    try:
        return Dataset(dataset)
    except (OSError, ValueError) as e:
        raise CheckError(f"{dataset}: cannot open the shardify dataset: {e}") from None


def _plans_path(dataset, given, options):
    if given is not None:
        given = os.fspath(given)
        if not os.path.isfile(given):
            raise CheckError(f"{given}: no such file (--plans)")
        return given
    beside = os.path.join(dataset, PLANS_FILE)
    if os.path.isfile(beside):
        return beside
    if "plans" in options:
        raise CheckError(f"{dataset} was converted with --plans {options['plans']} (xxh3 "
                         f"{options.get('plans_xxh3', '?')}) and holds no {PLANS_FILE}: give that file with --plans")
    raise CheckError(f"{beside}: no such file, and the dataset's provenance names no plans: give nnU-Net's plans "
                     f"with --plans FILE")


def _plans_text(path, plans):
    return f"{path} ({plans.get('plans_name', '?')}, {plans.get('dataset_name', '?')})"


def _converted(options):
    """How the dataset was converted, from its provenance (its plans by name and checksum: the
    reader compares them with the plans given)."""
    if "plans" in options:
        return (f"converted with --plans {options['plans']} (xxh3 {options.get('plans_xxh3', '?')}, "
                f"configuration {options.get('plans_configuration', '?')})")
    if "preprocess" in options:
        return f"converted with --preprocess {options['preprocess']}"
    return "converted without --preprocess nnunet or --plans"


def _configuration(given, options, plans, path):
    converted = options.get("plans_configuration")
    if given is not None and converted is not None and given != converted:
        raise CheckError(f"--configuration {given}: the dataset was converted with configuration {converted}")
    name = given or converted or "3d_fullres"
    available = list(plans.get("configurations") or {})
    if name not in available:
        raise CheckError(f"{path}: no configuration '{name}' (it has {', '.join(available) or 'none'})")
    return name


def _transpose_forward(plans, path, options, dataset):
    tf = plans.get("transpose_forward", _IDENTITY)
    if not isinstance(tf, list) or sorted(tf) != _IDENTITY:
        raise CheckError(f"{path}: transpose_forward {tf} is not a permutation of 0, 1, 2")
    recorded = options.get("plans_transpose_forward")
    if recorded is not None and recorded != ",".join(map(str, tf)):
        raise CheckError(f"{path}: transpose_forward {tf}, but {dataset} was converted with plans whose "
                         f"transpose_forward is [{recorded}]: give the plans it was converted with")
    return tf


def _held_cases(ds, dataset):
    if "path" not in [f["name"] for f in ds.fields]:
        raise CheckError(f"{dataset}: no 'path' field, so its samples name no nnU-Net case")
    held = {}
    for i in range(len(ds)):
        path = ds.get(i, ["path"])["path"]
        if path.startswith(_CASE_PREFIX):
            held[path[len(_CASE_PREFIX):]] = i
    if not held:
        raise CheckError(f"{dataset}: no sample is an nnU-Net training case (path {_CASE_PREFIX}<case>); "
                         f"was it converted from an nnU-Net raw dataset?")
    return held


def _choose(cases, held, dataset):
    if isinstance(cases, int) and not isinstance(cases, bool):
        if cases < 1:
            raise CheckError(f"cases must be at least 1, got {cases}")
        return sorted(held)[:cases]
    names = [cases] if isinstance(cases, str) else list(cases)
    unknown = [n for n in names if n not in held]
    if unknown or not names:
        some = ", ".join(sorted(held)[:5]) + (", ..." if len(held) > 5 else "")
        raise CheckError(f"{dataset} holds no training case {', '.join(unknown) or '(none named)'}; it has {some}")
    return names


def _case_files(raw, dataset_json, name):
    ending = dataset_json.get("file_ending", ".nii.gz")
    channels = len(dataset_json.get("channel_names", dataset_json.get("modality")))
    images = [os.path.join(raw, "imagesTr", f"{name}_{c:04d}{ending}") for c in range(channels)]
    seg = os.path.join(raw, "labelsTr", f"{name}{ending}")
    for path in images + [seg]:
        if not os.path.isfile(path):
            raise CheckError(f"{path}: no such file (case {name})")
    return images, seg
