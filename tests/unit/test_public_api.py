from __future__ import annotations

import crawlq


def test_all_is_sorted_and_complete() -> None:
    assert crawlq.__all__ == sorted(crawlq.__all__)
    public = {name for name in vars(crawlq) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(crawlq, name)).__name__ == "module"}
    assert set(crawlq.__all__) == public - modules - {"annotations"}


def test_every_exported_error_derives_from_the_root() -> None:
    for name in crawlq.__all__:
        obj = getattr(crawlq, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and name.endswith("Error"):
            assert issubclass(obj, crawlq.CrawlqError)


def test_what_the_readme_uses_is_exported() -> None:
    """README: ``app.store.job_list(JobFilter(...))``."""
    from crawlq.stores.base import JobFilter

    assert crawlq.JobFilter is JobFilter and "JobFilter" in crawlq.__all__
