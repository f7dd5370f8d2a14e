"""Tests of authz/policies as a package: its shared kit and its declarative rules."""
