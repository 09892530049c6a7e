-- Deliveries by outcome and reason, for the report.
SELECT outcome, reason, count(*) FROM deliveries GROUP BY outcome, reason ORDER BY 3 DESC
