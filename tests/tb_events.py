"""Read real TensorBoard event files (no TensorBoard server needed)."""

from collections import defaultdict
from pathlib import Path

import tensorflow as tf


def read_events(log_dir: Path) -> dict:
    """{'scalars': {tag: [values by step]}, 'histograms': set(tags), 'graph': bool} for one run dir."""
    scalars, histograms, graph = defaultdict(list), set(), False
    for path in sorted(Path(log_dir).glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            graph = graph or bool(event.graph_def)
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                if plugin == "histograms":
                    histograms.add(value.tag)
                elif plugin == "scalars" or value.HasField("simple_value"):
                    number = (
                        value.simple_value if value.HasField("simple_value") else float(tf.make_ndarray(value.tensor))
                    )
                    scalars[value.tag].append((event.step, number))
    return {"scalars": dict(scalars), "histograms": histograms, "graph": graph}


def read_pictures(log_dir: Path) -> dict:
    """{tag: [(step, [encoded PNGs], description)]} of the image summaries, and the text summaries as
    {tag: [(step, text, description)]} under the key "text"."""
    images, texts = defaultdict(list), defaultdict(list)
    for path in sorted(Path(log_dir).glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                if plugin == "images":  # a string tensor: width, height, then one PNG per image
                    images[value.tag].append(
                        (event.step, list(tf.make_ndarray(value.tensor))[2:], value.metadata.summary_description)
                    )
                elif plugin == "text":
                    text = tf.make_ndarray(value.tensor).reshape(-1)[0].decode()
                    texts[value.tag].append((event.step, text, value.metadata.summary_description))
    return {**images, "text": dict(texts)}
