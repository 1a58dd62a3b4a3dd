"""The errors nsysreport raises; cli.py turns them into one line on stderr."""


class NsysReportError(Exception):
    """A problem the user can fix; the message names the file or option and the next step."""


class TraceError(NsysReportError):
    """The input file is missing, unreadable, or not a usable Nsight Systems export."""


class OptionError(NsysReportError):
    """A command-line option or parameter has a value that cannot be used."""


class OutputError(NsysReportError):
    """An output file could not be written (no room, a read-only disk, no permission)."""
