from dovecote.cli import main

main()
