"""Point labels that cannot overlap: a greedy placement measured in display pixels.

:func:`place_point_labels` puts one short label beside each point of an axes. Points closer
than :data:`MERGE_PX` share one label (their texts joined by commas, shortest first, so
run numbers read in order). Each label tries
:data:`OFFSETS_PX` gaps in the :data:`DIRECTIONS` around its point and takes the first box that
stays inside the axes and clears every label already placed and every other point's marker;
a label with no such box is not drawn and is returned, so the caller can say which points are
unlabelled. Invariant: no two drawn label boxes intersect (boxes are matplotlib's text extents,
which contain the glyphs). Deterministic: the same figure and points give the same placement.

Call after the figure's layout is final (``tight_layout`` done, axis limits fixed): the
placement is computed from the current transforms.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox

MERGE_PX = 3.0
"""Points within this distance (px) are one label: markers that close read as one point."""
OFFSETS_PX = (3.0, 9.0, 18.0)
"""Gaps (px) between a point and its label, tried in order."""
DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1))
"""Label corners tried around a point: above right first, as matplotlib's usual offset."""
MARKER_PX = 4.0
"""Half the side of the square each point's marker is taken to cover (px)."""
PAD_PX = 1.0
"""Clearance kept around a placed label (px)."""


def _clusters(points: np.ndarray) -> list[list[int]]:
    """Indices of points grouped with the first earlier point within :data:`MERGE_PX`."""
    groups: list[list[int]] = []
    for i, point in enumerate(points):
        for group in groups:
            if np.hypot(*(points[group[0]] - point)) <= MERGE_PX:
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def _candidates(anchor: np.ndarray, width: float, height: float) -> list[Bbox]:
    boxes = []
    for gap in OFFSETS_PX:
        for dx, dy in DIRECTIONS:
            x0 = anchor[0] + (gap if dx > 0 else -gap - width if dx < 0 else -width / 2)
            y0 = anchor[1] + (gap if dy > 0 else -gap - height if dy < 0 else -height / 2)
            boxes.append(Bbox.from_bounds(x0, y0, width, height))
    return boxes


def _free(box: Bbox, frame: Bbox, taken: list[Bbox]) -> bool:
    inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
    padded = box.padded(PAD_PX)
    return inside and not any(padded.overlaps(other) for other in taken)


def place_point_labels(
    ax: Axes, xy: np.ndarray, texts: Sequence[str], **text_kw: object
) -> list[str]:
    """Label the points ``xy`` (data coordinates, shape (n, 2)) with ``texts``, in order.

    Returns the labels that found no free place (not drawn). ``text_kw`` goes to
    :meth:`Axes.annotate` (font size, colour).
    """
    fig = ax.get_figure()
    if fig is None or len(texts) == 0:
        return []
    renderer = FigureCanvasAgg(fig).get_renderer()
    points = ax.transData.transform(np.asarray(xy, dtype=float))
    frame = ax.get_window_extent(renderer)
    half = MARKER_PX
    markers = [Bbox.from_extents(x - half, y - half, x + half, y + half) for x, y in points]
    taken: list[Bbox] = []
    unplaced: list[str] = []
    px_to_pt = 72.0 / fig.dpi
    for group in _clusters(points):
        text = ",".join(sorted((texts[i] for i in group), key=lambda t: (len(t), t)))
        label = ax.annotate(text, xy[group[0]], xytext=(0, 0), textcoords="offset points",
                            ha="left", va="bottom", annotation_clip=False, **text_kw)  # fmt: skip
        extent = label.get_window_extent(renderer)
        others = [m for i, m in enumerate(markers) if i not in group]
        anchor = points[group[0]]
        for box in _candidates(anchor, extent.width, extent.height):
            if _free(box, frame, taken + others):
                offset = (box.x0 - extent.x0, box.y0 - extent.y0)
                label.xyann = (offset[0] * px_to_pt, offset[1] * px_to_pt)
                taken.append(box)
                break
        else:
            label.remove()
            unplaced.append(text)
    return unplaced
