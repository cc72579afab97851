from django.core.management.base import BaseCommand

from tasks.demo import DEMO_SEED, build_demo


class Command(BaseCommand):
    help = "Create the demo users and demo studies (generated images with known ground truth). Safe to run twice."

    def add_arguments(self, parser):
        parser.add_argument("--seed", type=int, default=DEMO_SEED, help="Seed of the scene generator")
        parser.add_argument("--only", nargs="+", metavar="SLUG", help="Build only these demo studies")

    def handle(self, *args, seed: int, only: list[str] | None, **options):
        summary = build_demo(seed=seed, only=only)
        self.stdout.write(f"Created {len(summary.created_studies)} studies ({summary.items} items): {', '.join(summary.created_studies) or '-'}")
        if summary.existing_studies:
            self.stdout.write(f"Already there, left unchanged: {', '.join(summary.existing_studies)}")
        for username, password in summary.users.items():
            self.stdout.write(f"  login {username:<11} password {password}")
