from django.core.management.base import BaseCommand

from tasks.demo import DEMO_SEED, build_demo


class Command(BaseCommand):
    help = "Create the demo users and demo studies (generated images with known ground truth). Safe to run twice."

    def add_arguments(self, parser):
        parser.add_argument("--seed", type=int, default=DEMO_SEED, help="Seed of the scene generator")

    def handle(self, *args, seed: int, **options):
        summary = build_demo(seed=seed)
        self.stdout.write(f"Created {len(summary.created_studies)} studies ({summary.items} items): {', '.join(summary.created_studies) or '-'}")
        if summary.existing_studies:
            self.stdout.write(f"Already there, left unchanged: {', '.join(summary.existing_studies)}")
        for username, password in summary.users.items():
            self.stdout.write(f"  login {username:<11} password {password}")
