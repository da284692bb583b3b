"""A reference of nnU-Net v2's preprocessing, in numpy, scipy, scikit-image and nibabel:
what its fingerprint extractor, default experiment planner and DefaultPreprocessor compute
for the 3d_fullres configuration, function by function. Each function names the one it
follows, in nnU-Net v2.8.1 (github.com/MIC-DKFZ/nnUNet at
468cf803df9b267150ae2b6c0c59b8ac84f16227, paths under nnunetv2/) unless it says otherwise;
the arithmetic is the same (dtypes, order of operations), the plumbing (plans objects,
multiprocessing, files) is left out. test_nnunet_parity.py compares shardify's datasets with
it; test_check.py's stand-in nnunetv2 preprocesses with it."""

import numpy as np
from scipy import ndimage
from skimage.transform import resize

ANISO_THRESHOLD = 3  # configuration.py: ANISO_THRESHOLD
NNUNET_FOREGROUND_DRAWS = 10e7  # DatasetFingerprintExtractor.__init__: num_foreground_voxels_for_intensitystats


# ---------------------------------------------------------------- reading (imageio/)

def read_images(paths):
    """imageio/nibabel_reader_writer.py: NibabelIO.read_images. nibabel's get_fdata applies
    scl_slope and scl_inter in float64; the volume is transposed to (z, y, x) and the
    channels stacked as float32. Returns (data [C, z, y, x], spacing (z, y, x))."""
    import nibabel
    images, spacings = [], []
    for p in paths:
        image = nibabel.load(str(p))
        assert image.ndim == 3, "NibabelIO reads 3D images only"
        spacings.append([float(i) for i in image.header.get_zooms()[::-1]])
        images.append(image.get_fdata().transpose((2, 1, 0))[None])
    assert all(s == spacings[0] for s in spacings), "channels of one case share their spacing"
    return np.vstack(images, dtype=np.float32, casting="unsafe"), spacings[0]


# ---------------------------------------------------------------- cropping (preprocessing/cropping/cropping.py)

def create_nonzero_mask(data):
    """create_nonzero_mask: voxels nonzero in any channel, holes filled."""
    mask = data[0] != 0
    for c in range(1, data.shape[0]):
        mask |= data[c] != 0
    return ndimage.binary_fill_holes(mask)


def crop_to_nonzero(data, seg, nonzero_label=-1):
    """crop_to_nonzero (bounding box as acvl_utils' get_bbox_from_mask): data and seg cropped
    to the box of the nonzero mask; seg's unlabelled voxels outside the mask become
    nonzero_label. Returns (data, seg, box as slices)."""
    mask = create_nonzero_mask(data)
    box = tuple(slice(int(i.min()), int(i.max()) + 1) for i in np.nonzero(mask))
    mask = mask[box][None]
    data = data[(slice(None),) + box]
    seg = seg[(slice(None),) + box]
    seg[(seg == 0) & ~mask] = nonzero_label
    return data, seg, box


# ---------------------------------------------------------------- fingerprint
# (experiment_planning/dataset_fingerprint/fingerprint_extractor.py)

def collect_foreground_intensities(seg, images, seed=1234, num_samples=10000):
    """DatasetFingerprintExtractor.collect_foreground_intensities: per channel, num_samples
    foreground values (seg[0] > 0) drawn with replacement by one RandomState(seed)."""
    rs = np.random.RandomState(seed)
    foreground = seg[0] > 0
    out = []
    for i in range(len(images)):
        pixels = images[i][foreground]
        out.append(rs.choice(pixels, num_samples, replace=True) if len(pixels) > 0 else [])
    return out


def fingerprint(cases, foreground_draws=NNUNET_FOREGROUND_DRAWS, intensities=True):
    """DatasetFingerprintExtractor.analyze_case and run, over cases (data [C, z, y, x]
    float32, seg [1, z, y, x], spacing) in nnU-Net's order: spacings, shapes after
    cropping, median relative size after cropping, and per channel the statistics of the
    concatenated foreground draws (int(foreground_draws // cases) per case; nnU-Net draws
    10e7 in all)."""
    per_case = int(foreground_draws // len(cases))
    shapes, spacings, draws, relative = [], [], [], []
    for data, seg, spacing in cases:
        cropped, seg_cropped, _ = crop_to_nonzero(data, np.copy(seg))
        if intensities:
            draws.append(collect_foreground_intensities(seg_cropped, cropped, num_samples=per_case))
        spacings.append(list(spacing))
        shapes.append(cropped.shape[1:])
        relative.append(np.prod(cropped.shape[1:]) / np.prod(data.shape[1:]))
    properties = {}
    for c in range(len(cases[0][0]) if intensities else 0):
        values = np.concatenate([d[c] for d in draws])
        p005, median, p995 = np.percentile(values, (0.5, 50.0, 99.5))
        properties[str(c)] = {"mean": float(np.mean(values)), "median": float(median), "std": float(np.std(values)),
                              "min": float(np.min(values)), "max": float(np.max(values)),
                              "percentile_99_5": float(p995), "percentile_00_5": float(p005)}
    return {"spacings": spacings, "shapes_after_crop": shapes,
            "foreground_intensity_properties_per_channel": properties,
            "median_relative_size_after_cropping": float(np.median(relative, 0))}


# ---------------------------------------------------------------- planning
# (experiment_planning/experiment_planners/default_experiment_planner.py)

def determine_fullres_target_spacing(fp):
    """ExperimentPlanner.determine_fullres_target_spacing: the median spacing; an axis over 3x
    coarser than the others with over 3x fewer voxels (median shapes after cropping) takes
    the 10th percentile of its spacings, but not finer than the others."""
    spacings = np.vstack(fp["spacings"])
    target = np.percentile(spacings, 50, 0)
    target_size = np.percentile(np.vstack(fp["shapes_after_crop"]), 50, 0)
    worst = np.argmax(target)
    other_axes = [i for i in range(len(target)) if i != worst]
    other_spacings = [target[i] for i in other_axes]
    other_sizes = [target_size[i] for i in other_axes]
    has_aniso_spacing = target[worst] > (ANISO_THRESHOLD * max(other_spacings))
    has_aniso_voxels = target_size[worst] * ANISO_THRESHOLD < min(other_sizes)
    if has_aniso_spacing and has_aniso_voxels:
        t = np.percentile(spacings[:, worst], 10)
        if t < max(other_spacings):
            t = max(max(other_spacings), t) + 1e-5
        target[worst] = t
    return target


def get_normalization_scheme(channel_name):
    """preprocessing/normalization/map_channel_name_to_normalization.py:
    get_normalization_scheme (the schemes shardify has: CT, noNorm, zscore, the rest zscore)."""
    return {"ct": "CTNormalization", "nonorm": "NoNormalization"}.get(channel_name.casefold(), "ZScoreNormalization")


def determine_normalization_scheme_and_whether_mask_is_used_for_norm(channel_names, fp):
    """ExperimentPlanner.determine_normalization_scheme_and_whether_mask_is_used_for_norm:
    the mask is used where cropping keeps a median below 3/4, by ZScoreNormalization only."""
    schemes = [get_normalization_scheme(n) for n in channel_names]
    if fp["median_relative_size_after_cropping"] < (3 / 4.):
        return schemes, [s == "ZScoreNormalization" for s in schemes]
    return schemes, [False] * len(schemes)


def determine_transpose(target_spacing):
    """ExperimentPlanner.determine_transpose: the coarsest axis first."""
    worst = int(np.argmax(target_spacing))
    forward = [worst] + [i for i in range(3) if i != worst]
    backward = [int(np.argwhere(np.array(forward) == i)[0][0]) for i in range(3)]
    return forward, backward


def plans(fp, channel_names, target_spacing=None):
    """ExperimentPlanner.plan_experiment, the entries of the plans and of their 3d_fullres
    configuration that preprocessing reads (determine_resampling's functions and kwargs)."""
    target = np.asarray(determine_fullres_target_spacing(fp) if target_spacing is None else target_spacing, float)
    forward, backward = determine_transpose(target)
    schemes, use_mask = determine_normalization_scheme_and_whether_mask_is_used_for_norm(channel_names, fp)
    new_shapes = [compute_new_shape(s, sp, target) for sp, s in zip(fp["spacings"], fp["shapes_after_crop"])]
    return {"transpose_forward": forward, "transpose_backward": backward,
            "original_median_spacing_after_transp": [float(i) for i in np.median(fp["spacings"], 0)[forward]],
            "original_median_shape_after_transp": [int(round(i))
                                                   for i in np.median(fp["shapes_after_crop"], 0)[forward]],
            "foreground_intensity_properties_per_channel": fp["foreground_intensity_properties_per_channel"],
            "configurations": {"3d_fullres": {
                "spacing": [float(i) for i in target[forward]],
                "median_image_size_in_voxels": [float(i) for i in np.median(new_shapes, 0)[forward]],
                "normalization_schemes": schemes, "use_mask_for_norm": use_mask,
                "resampling_fn_data_kwargs": {"is_seg": False, "order": 3, "order_z": 0, "force_separate_z": None},
                "resampling_fn_seg_kwargs": {"is_seg": True, "order": 1, "order_z": 0, "force_separate_z": None}}}}


# ---------------------------------------------------------------- normalization
# (preprocessing/normalization/default_normalization_schemes.py)

def zscore_normalization(image, seg, use_mask_for_norm):
    """ZScoreNormalization.run (float32): within seg >= 0 when the mask is used (the rest
    kept as it is), else over every voxel."""
    image = image.astype(np.float32, copy=False)
    if use_mask_for_norm:
        mask = seg >= 0
        mean = image[mask].mean()
        std = image[mask].std()
        image[mask] = (image[mask] - mean) / (max(std, 1e-8))
    else:
        mean = image.mean()
        std = image.std()
        image -= mean
        image /= (max(std, 1e-8))
    return image


def ct_normalization(image, properties):
    """CTNormalization.run (float32): clipped to the foreground's 0.5 and 99.5 percentiles,
    then z-scored with its mean and std."""
    image = image.astype(np.float32, copy=False)
    np.clip(image, properties["percentile_00_5"], properties["percentile_99_5"], out=image)
    image -= properties["mean"]
    image /= max(properties["std"], 1e-8)
    return image


def normalize(data, seg, schemes, use_mask, properties):
    """DefaultPreprocessor._normalize: each channel by its scheme, seg[0] as the region."""
    for c, scheme in enumerate(schemes):
        if scheme == "ZScoreNormalization":
            data[c] = zscore_normalization(data[c], seg[0], use_mask[c])
        elif scheme == "CTNormalization":
            data[c] = ct_normalization(data[c], properties[str(c)])
        else:
            data[c] = data[c].astype(np.float32, copy=False)
    return data


# ---------------------------------------------------------------- resampling
# (preprocessing/resampling/default_resampling.py)

def get_do_separate_z(spacing, anisotropy_threshold=ANISO_THRESHOLD):
    return (np.max(spacing) / np.min(spacing)) > anisotropy_threshold


def get_lowres_axis(new_spacing):
    return np.where(max(new_spacing) / np.array(new_spacing) == 1)[0]


def compute_new_shape(old_shape, old_spacing, new_spacing):
    return np.array([int(round(i / j * k)) for i, j, k in zip(old_spacing, new_spacing, old_shape)])


def determine_do_sep_z_and_axis(current_spacing, new_spacing):
    """determine_do_sep_z_and_axis with force_separate_z None (the planner's kwargs)."""
    if get_do_separate_z(current_spacing):
        axis = get_lowres_axis(current_spacing)
    elif get_do_separate_z(new_spacing):
        axis = get_lowres_axis(new_spacing)
    else:
        return False, None
    if len(axis) in (2, 3):
        return False, None
    return True, int(axis[0])


def resize_segmentation(segmentation, new_shape, order=3):
    """batchgenerators/augmentations/utils.py: resize_segmentation (MIC-DKFZ/batchgenerators
    0.25): per label (ascending), its indicator resized; the last label at >= 0.5 wins."""
    tpe = segmentation.dtype
    unique_labels = np.unique(segmentation)
    if order == 0:
        return resize(segmentation.astype(float), new_shape, order, mode="edge", clip=True,
                      anti_aliasing=False).astype(tpe)
    reshaped = np.zeros(new_shape, dtype=segmentation.dtype)
    for c in unique_labels:
        mask = segmentation == c
        reshaped_multihot = resize(mask.astype(float), new_shape, order, mode="edge", clip=True, anti_aliasing=False)
        reshaped[reshaped_multihot >= 0.5] = c
    return reshaped


def resample_data_or_seg(data, new_shape, is_seg, axis, order, do_separate_z, order_z=0):
    """resample_data_or_seg: whole volumes; or with a separate axis each slice along it
    in-plane, then that axis by map_coordinates of order_z on skimage's coordinates."""
    if is_seg:
        resize_fn, kwargs = resize_segmentation, {}
    else:
        resize_fn, kwargs = resize, {"mode": "edge", "anti_aliasing": False}
    shape = np.array(data[0].shape)
    new_shape = np.array(new_shape)
    reshaped_final = np.zeros((data.shape[0], *new_shape), dtype=data.dtype)
    if not np.any(shape != new_shape):
        return data
    data = data.astype(float, copy=False)
    if not do_separate_z:
        for c in range(data.shape[0]):
            reshaped_final[c] = resize_fn(data[c], new_shape, order, **kwargs)
        return reshaped_final
    new_shape_2d = np.delete(new_shape, axis)
    for c in range(data.shape[0]):
        tmp = new_shape.copy()
        tmp[axis] = shape[axis]
        reshaped_here = np.zeros(tmp)
        for slice_id in range(shape[axis]):
            index = [slice(None)] * 3
            index[axis] = slice_id
            reshaped_here[tuple(index)] = resize_fn(data[c][tuple(index)], new_shape_2d, order, **kwargs)
        if shape[axis] == new_shape[axis]:
            reshaped_final[c] = reshaped_here
            continue
        grid = np.mgrid[:new_shape[0], :new_shape[1], :new_shape[2]].astype(float)
        for a in range(3):
            grid[a] = float(reshaped_here.shape[a]) / new_shape[a] * (grid[a] + 0.5) - 0.5
        assert not is_seg or order_z == 0
        reshaped_final[c] = ndimage.map_coordinates(reshaped_here, grid, order=order_z, mode="nearest")
    return reshaped_final


def resample_data_or_seg_to_shape(data, new_shape, current_spacing, new_spacing, is_seg=False, order=3, order_z=0):
    """resample_data_or_seg_to_shape with force_separate_z None."""
    do_separate_z, axis = determine_do_sep_z_and_axis(current_spacing, new_spacing)
    return resample_data_or_seg(data, new_shape, is_seg, axis, order, do_separate_z, order_z=order_z)


# ---------------------------------------------------------------- one case
# (preprocessing/preprocessors/default_preprocessor.py)

def run_case_npy(data, seg, spacing, plan):
    """DefaultPreprocessor.run_case_npy for the 3d_fullres configuration of `plan` (plans()):
    transpose, crop, normalize, resample; the seg int8 (int16 above 127). Returns (data,
    seg, crop box) in nnU-Net's transposed axis order."""
    config = plan["configurations"]["3d_fullres"]
    forward = plan["transpose_forward"]
    data = data.astype(np.float32).transpose([0, *[i + 1 for i in forward]])
    seg = np.copy(seg).transpose([0, *[i + 1 for i in forward]])
    original_spacing = [spacing[i] for i in forward]
    data, seg, box = crop_to_nonzero(data, seg)
    target_spacing = config["spacing"]
    new_shape = compute_new_shape(data.shape[1:], original_spacing, target_spacing)
    data = normalize(data, seg, config["normalization_schemes"], config["use_mask_for_norm"],
                     plan["foreground_intensity_properties_per_channel"])
    data = resample_data_or_seg_to_shape(data, new_shape, original_spacing, target_spacing, False,
                                         config["resampling_fn_data_kwargs"]["order"])
    seg = resample_data_or_seg_to_shape(seg, new_shape, original_spacing, target_spacing, True,
                                        config["resampling_fn_seg_kwargs"]["order"])
    seg = seg.astype(np.int16) if np.max(seg) > 127 else seg.astype(np.int8)
    return data, seg, box


def untranspose(array, forward):
    """An array [C, ...] in nnU-Net's axis order back to the source's (z, y, x)."""
    return array.transpose([0, *[int(i) + 1 for i in np.argsort(forward)]])
