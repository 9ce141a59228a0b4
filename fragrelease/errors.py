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


class OutputConflictError(ConfigError):
    """A release's output path holds something the release must not write into (a file, other files, a
    ledger, another system's or dataset's table, another release's uncommitted write); found before
    any owner spends. The message names the path, what is there and what to do."""


class BudgetExceededError(FragReleaseError):
    """A release would take an owner's spent ε past its declared lifetime budget."""


class SigningKeyError(ConfigError):
    """An owner's signing key or public key is missing, malformed, unsafe (readable by others, under a
    shared folder) or does not match; the message names the owner and the path or value."""


class SignatureError(ManifestMismatchError):
    """A manifest is unsigned, or its Ed25519 signature does not verify under its owner's public key."""


class StorageError(FragReleaseError, OSError):
    """Shared storage refused a read or write: disk full, read-only folder, permission denied, a file
    where a folder must be. The message names the path and the operating system's cause."""


class LedgerStorageError(StorageError):
    """An owner's budget ledger cannot be read or written; nothing was spent."""


class LedgerDamagedError(LedgerStorageError):
    """An owner's budget ledger is damaged: its ``_delta_log`` is missing, has a gap in its versions or
    an empty or unparseable commit, or a data file it references is missing, not Parquet or holds an
    unparseable row. Every spend is refused (nothing was spent) until the ledger is restored; the
    message names the ledger and the damage."""


class PlanAlreadySpentError(FragReleaseError):
    """An owner's ledger already records a spend on this plan for this dataset: a plan is spent once;
    the aggregator issues a new plan for another attempt. Nothing was spent."""


class TableWriteError(StorageError):
    """A Delta table commit failed on storage; the files the failed write created were removed."""


class ConcurrentCommitError(FragReleaseError):
    """Another writer committed to the same Delta table at the same time (two releases creating the
    same output table, or adding versions to it concurrently); the losing write's files were removed
    and nothing of it is readable."""


class MissingDependencyError(FragReleaseError, ImportError):
    """A runtime dependency is missing or outside the supported range (pyspark < 4.0 or not installed)."""


class PseudonymKeyError(FragReleaseError, ValueError):
    """An owner's pseudonym key is missing, unreadable, too short or misplaced; names the owner and where it looked."""


class DeltaUnavailableError(FragReleaseError):
    """Delta Lake's Spark classes were required (``FRAGRELEASE_DELTA=spark``) but cannot be loaded."""


class DeltaWriteError(FragReleaseError):
    """A Delta commit through Spark failed; the files this write created were removed (message: the cause)."""
