from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from tasks.images import images_prune, orphan_files_prune


class Command(BaseCommand):
    help = ("Delete stored images that no study uses any more (e.g. after a study was deleted), with their "
            "files and resized copies, and files no row refers to (left by a killed upload or build). "
            "Without --yes it only counts them.")

    def add_arguments(self, parser):
        parser.add_argument("--older-than-hours", type=float, default=24.0,
                            help="keep images and files stored more recently than this (an upload may be about to use them)")
        parser.add_argument("--yes", action="store_true", help="delete; without it, only count")

    def handle(self, *args, older_than_hours: float, yes: bool, **options):
        if older_than_hours < 0:
            raise CommandError("--older-than-hours must be 0 or more")
        older_than = timedelta(hours=older_than_hours)
        images, nbytes = images_prune(older_than=older_than, dry_run=not yes)
        files, file_bytes = orphan_files_prune(older_than=older_than, dry_run=not yes)
        verb = "Deleted" if yes else "Would delete"
        self.stdout.write(f"{verb} {images} unused image{'s' if images != 1 else ''} ({nbytes / 1e6:.1f} MB of originals)"
                          f" and {files} file{'s' if files != 1 else ''} without a row ({file_bytes / 1e6:.1f} MB)"
                          + ("" if yes else "; run with --yes to delete them"))
