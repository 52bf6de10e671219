"""Reports and their audit: weekly and monthly reports, scoreboards, and re-rendering a report's rows from the files they cite."""
