"""ackfold: Storm's guaranteed message processing for Spark streaming pipelines.

Example:
    >>> from ackfold import Tracker
    >>> tracker = Tracker("wordcount")
    >>> sentence = tracker.spout("msg-1")
    >>> tracker.ack(sentence, stage="split")
    >>> [event["kind"] for event in tracker.drain()]
    ['init', 'ack']
"""

from ackfold.track.tracker import Tracker, TrackingError, Tuple

__version__ = "0.1.0"
__all__ = ["Tracker", "TrackingError", "Tuple", "__version__"]
