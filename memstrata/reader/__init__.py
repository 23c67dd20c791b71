"""The write path's front: turning caller input into memory items."""
