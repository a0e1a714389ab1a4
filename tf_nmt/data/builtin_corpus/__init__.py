"""English-German parallel corpus built offline from Debian packages, and readers for user corpora.

``prepare_corpus`` builds ``train/dev/test`` files from Ding example sentences,
LibreOffice help and UI catalogs, GCC messages, the Debian Handbook and GNOME docs.
"""
from .builder import BUILDER_VERSION, prepare_corpus
from .errors import CorpusError
from .parallel_files import read_parallel, read_tsv_parallel

__all__ = ["BUILDER_VERSION", "CorpusError", "prepare_corpus", "read_parallel", "read_tsv_parallel"]
