"""A stand-in for the part of nnU-Net v2 (nnunetv2) that `shardify.check.nnunet` calls, for
machines without nnunetv2: the same module paths, classes, methods and signatures, over the
reference in nnunet_reference.py.

    nnunetv2.preprocessing.preprocessors.default_preprocessor.DefaultPreprocessor
        (verbose).run_case(image_files, seg_file, plans_manager, configuration_manager, dataset_json)
    nnunetv2.utilities.plans_handling.plans_handler.PlansManager(plans_file_or_dict)
        .get_configuration(name) -> ConfigurationManager, .transpose_forward,
        .image_reader_writer_class, .foreground_intensity_properties_per_channel
    nnunetv2.imageio.nibabel_reader_writer.NibabelIO().read_images(files), .read_seg(file)

Followed from nnunetv2 at MIC-DKFZ/nnUNet@468cf803df9b267150ae2b6c0c59b8ac84f16227 (v2.8.1):
preprocessing/preprocessors/default_preprocessor.py (DefaultPreprocessor.run_case: read
with the plans' reader, then run_case_npy, which records shape_before_cropping and
bbox_used_for_cropping), utilities/plans_handling/plans_handler.py (PlansManager,
ConfigurationManager; inherits_from resolved parent first) and
imageio/nibabel_reader_writer.py (NibabelIO). `install(monkeypatch)` puts the modules in
sys.modules for one test.
"""

import json
import sys
import types
from copy import deepcopy

import nnunet_reference as reference


class NibabelIO:
    """imageio/nibabel_reader_writer.py: NibabelIO.read_images, read_seg."""

    def read_images(self, image_fnames):
        data, spacing = reference.read_images(image_fnames)
        return data, {"spacing": spacing}

    def read_seg(self, seg_fname):
        return self.read_images((seg_fname,))


class ConfigurationManager:
    def __init__(self, configuration_dict):
        self.configuration = configuration_dict


class PlansManager:
    def __init__(self, plans_file_or_dict):
        if isinstance(plans_file_or_dict, dict):
            self.plans = plans_file_or_dict
        else:
            with open(plans_file_or_dict) as f:
                self.plans = json.load(f)

    def _resolve(self, name):
        configuration = deepcopy(self.plans["configurations"][name])
        if "inherits_from" in configuration:
            base = self._resolve(configuration["inherits_from"])
            base.update(configuration)
            configuration = base
        return configuration

    def get_configuration(self, configuration_name):
        if configuration_name not in self.plans["configurations"]:
            raise RuntimeError(f"Requested configuration {configuration_name} not found in plans")
        return ConfigurationManager(self._resolve(configuration_name))

    @property
    def transpose_forward(self):
        return self.plans["transpose_forward"]

    @property
    def image_reader_writer_class(self):
        assert self.plans["image_reader_writer"] == "NibabelIO", "the stand-in reads with NibabelIO only"
        return NibabelIO

    @property
    def foreground_intensity_properties_per_channel(self):
        return self.plans["foreground_intensity_properties_per_channel"]


class DefaultPreprocessor:
    def __init__(self, verbose=True):
        self.verbose = verbose

    def run_case_npy(self, data, seg, properties, plans_manager, configuration_manager, dataset_json):
        forward = plans_manager.transpose_forward
        properties["shape_before_cropping"] = [data.shape[1 + i] for i in forward]
        statistics = plans_manager.foreground_intensity_properties_per_channel
        plan = {"transpose_forward": forward, "configurations": {"3d_fullres": configuration_manager.configuration},
                "foreground_intensity_properties_per_channel": statistics}
        data, seg, box = reference.run_case_npy(data, seg, properties["spacing"], plan)
        properties["bbox_used_for_cropping"] = [[b.start, b.stop] for b in box]
        return data, seg, properties

    def run_case(self, image_files, seg_file, plans_manager, configuration_manager, dataset_json):
        if isinstance(dataset_json, str):
            with open(dataset_json) as f:
                dataset_json = json.load(f)
        rw = plans_manager.image_reader_writer_class()
        data, properties = rw.read_images(image_files)
        seg, _ = rw.read_seg(seg_file)
        return self.run_case_npy(data, seg, properties, plans_manager, configuration_manager, dataset_json)


_MODULES = {
    "nnunetv2.preprocessing.preprocessors.default_preprocessor": {"DefaultPreprocessor": DefaultPreprocessor},
    "nnunetv2.utilities.plans_handling.plans_handler": {"PlansManager": PlansManager,
                                                        "ConfigurationManager": ConfigurationManager},
    "nnunetv2.imageio.nibabel_reader_writer": {"NibabelIO": NibabelIO},
}


def install(monkeypatch):
    """Makes `import nnunetv2...` give these classes, for the test that calls it."""
    modules = {}
    for name in _MODULES:
        parts = name.split(".")
        for k in range(1, len(parts) + 1):
            modules[".".join(parts[:k])] = None
    for package in modules:
        modules[package] = types.ModuleType(package)
        modules[package].__path__, modules[package].__file__ = [], __file__
        monkeypatch.setitem(sys.modules, package, modules[package])
    for package, module in modules.items():
        parent, _, child = package.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    for name, members in _MODULES.items():
        for attr, value in members.items():
            setattr(modules[name], attr, value)
