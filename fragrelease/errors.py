"""Exceptions raised by fragrelease. Every message names the offending value."""


class FragReleaseError(Exception):
    """Base class of every error fragrelease raises on purpose."""


class InvalidParameterError(FragReleaseError, ValueError):
    """A privacy or protocol parameter is out of range (ε ≤ 0, k < 3, k > n, ...)."""


class ThresholdTooLooseError(InvalidParameterError):
    """A tier's disclosure threshold is at or above the disclosure of singleton classes.

    At such a threshold the tier may equal its input unchanged (nothing is sanitized). The message
    names the threshold, the tier index and the singleton disclosure; the latter is computed from
    the data, so the error is for the operator only and never goes into a release's provenance.
    """

    def __init__(self, message: str, *, tier: int, threshold, singleton_disclosure: float) -> None:
        super().__init__(message)
        self.tier = tier
        self.threshold = threshold
        self.singleton_disclosure = singleton_disclosure


class ConfigError(FragReleaseError, ValueError):
    """A configuration or schema file is malformed; the message names the key and value."""


class SchemaMismatchError(FragReleaseError, ValueError):
    """A fragment's columns or types do not match the declared dataset schema."""


class DomainError(FragReleaseError, ValueError):
    """A value is null or lies outside the attribute's declared domain."""


class IdentifierError(FragReleaseError, ValueError):
    """Record ids are missing, null, duplicated or differ between vertical fragments."""


class ProtocolError(FragReleaseError, ValueError):
    """The owners' metadata cannot be combined (horizontal: attributes differ; vertical: overlap)."""


class ManifestMismatchError(ProtocolError):
    """A protected fragment's manifest does not match the aggregator's plan or its content."""


class ReleaseExistsError(FragReleaseError, FileExistsError):
    """A release already exists at the target and the write mode does not allow a new version."""


class BudgetExceededError(FragReleaseError):
    """A release would take an owner's spent ε past its declared lifetime budget."""


class DeltaUnavailableError(FragReleaseError):
    """Delta Lake's Spark classes were required (``FRAGRELEASE_DELTA=spark``) but cannot be loaded."""


class DeltaWriteError(FragReleaseError):
    """A Delta commit through Spark failed; the files this write created were removed (message: the cause)."""
