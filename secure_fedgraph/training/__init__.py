"""Local training and evaluation loops shared by the papers' plans."""
