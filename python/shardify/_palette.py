"""Mask colours of labels 1, 2, ... (RGB), cycled: one table for T.save_grid and the viewer."""

COLOURS = ((230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48), (145, 30, 180),
           (70, 240, 240), (240, 50, 230))
